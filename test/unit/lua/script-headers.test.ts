import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ALGORITHMS } from '../../../src/domain/algorithm';
import { readLuaScript } from '../../../src/limiter/redis/lua-script';
import { luaDir } from '../../../src/paths';

// The contract of every script lives in its header (README, "Redis backend"); these checks keep
// the headers present and honest without running Redis. The code checks run on the expanded
// text (lib/*.lua included), which is what Redis runs.
const files = fs.readdirSync(luaDir).filter((f) => f.endsWith('.lua')).sort();
const libDir = path.join(luaDir, 'lib');
const libs = fs.readdirSync(libDir).filter((f) => f.endsWith('.lua')).sort();

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

  describe.each(files)('%s', (file) => {
    const source = fs.readFileSync(path.join(luaDir, file), 'utf8');
    const expanded = readLuaScript(file.replace(/\.lua$/, ''));
    const head = header(source);
    const code = body(source, expanded);

    it('is named in snake_case', () => {
      expect(file).toMatch(/^[a-z][a-z0-9]*(_[a-z0-9]+)*\.lua$/);
    });

    it('starts with a header documenting KEYS, ARGV and the return value', () => {
      expect(source.startsWith('--')).toBe(true);
      expect(head.some((l) => /^-- KEYS\[/.test(l))).toBe(true);
      expect(head.some((l) => /^-- ARGV\[/.test(l))).toBe(true);
      expect(head.some((l) => /^-- Returns\b/.test(l))).toBe(true);
    });

    it('documents every literal ARGV and KEYS index it reads, also in what it includes', () => {
      const documented = head.join('\n');
      for (const [ref] of code.matchAll(/\b(?:ARGV|KEYS)\[\d+\]/g)) {
        expect(documented, `${ref} is not in the header`).toContain(ref);
      }
    });

    it('never scans and never builds keys from strings', () => {
      expect(code).not.toMatch(/redis\.p?call\(\s*['"](?:KEYS|SCAN|SSCAN|HSCAN|ZSCAN)['"]/i);
      // Keys come from KEYS only: a key argument built with `..` would bypass cluster routing.
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

    it('starts by naming itself and saying what it provides', () => {
      expect(source.startsWith(`-- lib/${file}: `)).toBe(true);
      expect(head).toMatch(/^-- Provides$/m);
      const defined = [...source.matchAll(/^local function (\w+)/gm)].map((m) => m[1]!);
      expect(defined.length).toBeGreaterThan(0);
      for (const name of defined) {
        expect(head, `${name} is not in the header of lib/${file}`).toContain(`${name}(`);
      }
    });

    it('includes nothing (one level deep) and is included by some script', () => {
      expect(source).not.toMatch(/^--\s*@include\b/m);
      expect(included).toContain(`lib/${file}`);
    });
  });
});
