import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ALGORITHMS } from '../../../src/domain/algorithm';
import {
  algorithmScripts,
  CALL_PASSES,
  callMode,
  FIXED_WINDOW_REPLY_WIDTH,
  fixedWindowListScript,
  limitListScript,
  NAMED,
  REPLY_WIDTH,
  STOP_REQUEST_MODE,
  STOP_REQUEST_NAMED_MODE,
  type AlgorithmScript,
} from '../../../src/limiter/redis/algorithm-scripts';
import { readLuaScript } from '../../../src/limiter/redis/lua-script';
import { luaDir } from '../../../src/base/paths';

// The contract of every script lives in its header, and the one call protocol they share in
// lua/lib/read_call.lua (KEYS, ARGV) and lua/lib/run_call.lua (modes, reply); these checks keep
// the headers present and honest without running Redis. The code checks run on the expanded
// text (lib/*.lua included), which is what Redis runs.
const files = fs
  .readdirSync(luaDir)
  .filter((f) => f.endsWith('.lua'))
  .sort();
// The counting scripts share the one call protocol, except fixed_window.lua, whose lean protocol
// (issue 20) leaves the judgement to the caller; any other script (policy.lua) documents its own.
const isAlgorithmScript = (file: string): boolean => (ALGORITHMS as readonly string[]).includes(file.replace(/\.lua$/, ''));
const OWN_PROTOCOL = 'fixed_window.lua';
const algorithmFiles = files.filter(isAlgorithmScript);
const otherFiles = files.filter((f) => !isAlgorithmScript(f));
const libDir = path.join(luaDir, 'lib');
const libs = fs
  .readdirSync(libDir)
  .filter((f) => f.endsWith('.lua'))
  .sort();

const INCLUDE = /^--\s*@include\b/;

/** The leading comment block: every line up to the first line of code or include. */
function header(source: string): string[] {
  const lines: string[] = [];
  for (const line of source.split('\n')) {
    if (INCLUDE.test(line)) break;
    if (line.startsWith('--') || line.trim() === '') lines.push(line);
    else break;
  }
  return lines;
}

/** The text after the script's own header, includes expanded. */
function body(source: string, expanded: string): string {
  return expanded.split('\n').slice(header(source).length).join('\n');
}

describe('lua scripts', () => {
  it('exist, one per implemented algorithm', () => {
    expect(files).toContain('fixed_window.lua');
    for (const algorithm of ALGORITHMS) expect(files).toContain(`${algorithm}.lua`);
  });

  describe.each(otherFiles)('%s (not a counting script)', (file) => {
    const head = header(fs.readFileSync(path.join(luaDir, file), 'utf8'));

    it('is named in snake_case and starts with a header documenting its KEYS, ARGV and reply', () => {
      expect(file).toMatch(/^[a-z][a-z0-9]*(_[a-z0-9]+)*\.lua$/);
      expect(head.some((l) => /^-- KEYS\[1\]/.test(l))).toBe(true);
      expect(head.some((l) => /^-- ARGV\[1\]/.test(l))).toBe(true);
      expect(head.some((l) => /^-- Returns\s/.test(l))).toBe(true);
    });
  });

  it('fixed_window.lua documents its own protocol: KEYS, ARGV per counter and the reply width the limiter decodes', () => {
    const source = fs.readFileSync(path.join(luaDir, OWN_PROTOCOL), 'utf8');
    const head = header(source).join('\n');
    for (const ref of ['-- KEYS[i]', '-- ARGV[1]', '-- ARGV[3i-1 .. 3i+1]', 'ARGV[4i-2 .. 4i+1]', '-- ARGV[last]']) expect(head).toContain(ref);
    expect(head).toMatch(new RegExp(`^-- Returns\\s+${FIXED_WINDOW_REPLY_WIDTH} integers a counter`, 'm'));
    // The reply is written by lib/window_calls.lua, which the script includes: checked in the script as Redis runs it.
    expect(readLuaScript('fixed_window')).toContain(
      `out[${FIXED_WINDOW_REPLY_WIDTH} * i - 1], out[${FIXED_WINDOW_REPLY_WIDTH} * i] = count, reset_ms`,
    );
  });

  describe.each(algorithmFiles)('%s', (file) => {
    const source = fs.readFileSync(path.join(luaDir, file), 'utf8');
    const expanded = readLuaScript(file.replace(/\.lua$/, ''));
    const head = header(source);
    const code = body(source, expanded);

    it('is named in snake_case', () => {
      expect(file).toMatch(/^[a-z][a-z0-9]*(_[a-z0-9]+)*\.lua$/);
    });

    // fixed_window.lua's own protocol is checked on its own, above.
    if (file !== OWN_PROTOCOL) {
      it('starts with a header documenting its KEYS, pointing to the protocol for ARGV, and its reply', () => {
        expect(source.startsWith('--')).toBe(true);
        expect(head.some((l) => /^-- KEYS\[i\]/.test(l))).toBe(true);
        expect(head.some((l) => /^-- ARGV\[\.\.\.\]\s+as lib\/read_call\.lua/.test(l))).toBe(true);
        expect(head.some((l) => /^-- Returns\s+as lib\/run_call\.lua/.test(l))).toBe(true);
        expect(head.join('\n')).toContain('Protocol: lib/read_call.lua (KEYS, ARGV), lib/run_call.lua (modes, Returns)');
      });

      it('takes the one protocol: reads ARGV only through read_call and answers through run_call', () => {
        expect(source).toMatch(/^-- @include lib\/read_call\.lua$/m);
        expect(source).toMatch(/^-- @include lib\/run_call\.lua$/m);
        const own = source
          .split('\n')
          .slice(head.length)
          .filter((l) => !INCLUDE.test(l))
          .join('\n');
        expect(own).not.toMatch(/\bARGV\b/);
        expect(own).toMatch(new RegExp(`read_call\\('${file.replace(/\.lua$/, '')}'\\)`));
        expect(own.trimEnd()).toMatch(/\nreturn run_call\(call, step\)$/);
      });
    }

    it('reads only KEYS[i] of its own (one key per counter)', () => {
      const own = source.split('\n').slice(head.length).join('\n');
      for (const [ref] of own.matchAll(/\bKEYS\[[^\]]*\]/g)) expect(ref).toBe('KEYS[i]');
    });

    it('never scans and never builds keys from strings', () => {
      expect(code).not.toMatch(/redis\.p?call\(\s*['"](?:KEYS|SCAN|SSCAN|HSCAN|ZSCAN)['"]/i);
      // Keys come from KEYS (or a named call's names): a key argument built with `..` would
      // bypass cluster routing. The one built key, a fixed window's per-window key, is checked
      // in lib/fixed_window_step.lua's own test below.
      expect(code).not.toMatch(/redis\.p?call\(\s*['"]\w+['"]\s*,\s*[^,)]*\.\./);
    });

    it('reads the clock at most once per call', () => {
      expect(code.match(/redis\.p?call\(\s*['"]TIME['"]/gi)?.length ?? 0).toBeLessThanOrEqual(1);
    });
  });
});

describe('lua/lib', () => {
  const included = new Set(
    files.flatMap((f) => [...fs.readFileSync(path.join(luaDir, f), 'utf8').matchAll(/^-- @include (lib\/\S+)$/gm)].map((m) => m[1])),
  );

  describe.each(libs)('%s', (file) => {
    const source = fs.readFileSync(path.join(libDir, file), 'utf8');
    const head = header(source).join('\n');
    const code = source.split('\n').slice(header(source).length).join('\n');

    it('starts by naming itself and provides one function, named after the file', () => {
      expect(source.startsWith(`-- lib/${file}: `)).toBe(true);
      expect(head).toMatch(/^-- Provides$/m);
      const defined = [...source.matchAll(/^local function (\w+)/gm)].map((m) => m[1]!);
      const name = file.replace(/\.lua$/, '');
      expect(defined).toEqual([name]);
      expect(head, `${name} is not in the header of lib/${file}`).toContain(`${name}(`);
    });

    it('documents every literal ARGV and KEYS index it reads', () => {
      for (const [ref] of code.matchAll(/\b(?:ARGV|KEYS)\[\d+\]/g)) expect(head, `${ref} is not in the header`).toContain(ref);
    });

    it('includes nothing (one level deep) and is included by some script', () => {
      expect(source).not.toMatch(/^--\s*@include\b/m);
      expect(included).toContain(`lib/${file}`);
    });
  });

  it('fixed_window_step counts in the declared window key, or builds one only by appending to the counter name, after its hash tag (its slot)', () => {
    const code = fs.readFileSync(path.join(libDir, 'fixed_window_step.lua'), 'utf8');
    expect([...code.matchAll(/fw_format\(([^)]*)\)/g)].map((m) => m[1])).toEqual(["':%d', start / 1000"]);
    // The declared key, or (Redis' TIME in another window) the declared key's counter name plus
    // TIME's window: nothing else.
    expect([...code.matchAll(/local key = (.*)/g)].map((m) => m[1])).toEqual(['declared']);
    expect([...code.matchAll(/\bkey = ([^=\n]*\.\.[^\n]*)/g)].map((m) => m[1])).toEqual([
      "(fw_match(declared, '^(.*):%d+$') or declared) .. suffix end",
    ]);
  });

  it('read_call documents the 4-integer argument layout per key that the limiter sends', () => {
    const head = header(fs.readFileSync(path.join(libDir, 'read_call.lua'), 'utf8')).join('\n');
    for (const ref of ['ARGV[1]', 'ARGV[4i-2]', 'ARGV[4i-1]', 'ARGV[4i]', 'ARGV[4i+1]', 'ARGV[4n+2]']) expect(head).toContain(ref);
  });

  it('run_call documents the reply width the limiter decodes', () => {
    const text = fs.readFileSync(path.join(libDir, 'run_call.lua'), 'utf8');
    expect(header(text).join('\n')).toContain(`a flat array of ${REPLY_WIDTH}n integers`);
    expect(text).toContain(`local at = ${REPLY_WIDTH} * i - ${REPLY_WIDTH - 1}`);
  });
});

describe('mode names (lua/lib/read_mode.lua)', () => {
  /** The names `script` takes: the list it gives read_mode (read_call's, for the four of lib/read_call.lua). */
  function takes(script: string): string[] {
    const expanded = readLuaScript(script);
    const calls = [...expanded.matchAll(/read_mode\((?:'(\w+)'|script), \{([^}]*)\}\)/g)];
    expect(calls, script).toHaveLength(1);
    return [...calls[0]![2]!.matchAll(/'([^']*)'/g)].map((m) => m[1]!);
  }
  const names = new Set(CALL_PASSES.flatMap((pass) => [callMode(pass), callMode(pass, true)]));

  it("reads the suffix the limiter sends for named counters, and the scripts take only the limiter's names", () => {
    expect(fs.readFileSync(path.join(libDir, 'read_mode.lua'), 'utf8')).toContain(`string.find(text, '${NAMED}', 1, true)`);
    for (const file of files.filter((f) => f !== 'policy.lua')) {
      for (const name of takes(file.replace(/\.lua$/, ''))) expect(names, `${file}: ${name}`).toContain(name);
    }
  });

  it('every mode the limiter sends a script is one the script takes', () => {
    const scripts: [string, AlgorithmScript][] = [
      ...Object.entries(algorithmScripts()),
      ['limit_list', limitListScript()],
      ['fixed_window_list', fixedWindowListScript()],
    ];
    for (const [name, script] of scripts) {
      for (const pass of CALL_PASSES) {
        expect(takes(name), `${name} ${pass}`).toContain(script.mode(pass));
        const named = script.namedMode(pass);
        if (named !== undefined) expect(takes(name), `${name} ${pass} named`).toContain(named);
      }
    }
    expect(takes('stop_request')).toEqual([STOP_REQUEST_MODE, STOP_REQUEST_NAMED_MODE]);
  });
});
