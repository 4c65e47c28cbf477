import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import { IMPLEMENTED_ALGORITHMS } from '../../../src/limiter/limiter';
import { luaDir } from '../../../src/paths';

// The contract of every script lives in its header (see docs: "Lua scripts"); these checks keep
// the headers present and honest without running Redis.
const files = fs.readdirSync(luaDir).filter((f) => f.endsWith('.lua')).sort();

/** The leading comment block: every line up to the first line of code. */
function header(source: string): string[] {
  const lines: string[] = [];
  for (const line of source.split('\n')) {
    if (line.startsWith('--') || line.trim() === '') lines.push(line);
    else break;
  }
  return lines;
}

function body(source: string): string {
  return source.split('\n').slice(header(source).length).join('\n');
}

describe('lua scripts', () => {
  it('exist, one per implemented algorithm', () => {
    expect(files).toContain('fixed_window.lua');
    for (const algorithm of IMPLEMENTED_ALGORITHMS) expect(files).toContain(`${algorithm}.lua`);
  });

  describe.each(files)('%s', (file) => {
    const source = fs.readFileSync(path.join(luaDir, file), 'utf8');
    const head = header(source);

    it('is named in snake_case', () => {
      expect(file).toMatch(/^[a-z][a-z0-9]*(_[a-z0-9]+)*\.lua$/);
    });

    it('starts with a header documenting KEYS, ARGV and the return value', () => {
      expect(source.startsWith('--')).toBe(true);
      expect(head.some((l) => /^-- KEYS\[/.test(l))).toBe(true);
      expect(head.some((l) => /^-- ARGV\[/.test(l))).toBe(true);
      expect(head.some((l) => /^-- Returns\b/.test(l))).toBe(true);
    });

    it('documents every literal ARGV and KEYS index it reads', () => {
      const documented = head.join('\n');
      for (const [ref] of body(source).matchAll(/\b(?:ARGV|KEYS)\[\d+\]/g)) {
        expect(documented, `${ref} is not in the header`).toContain(ref);
      }
    });

    it('never scans and never builds keys from strings', () => {
      const code = body(source);
      expect(code).not.toMatch(/redis\.p?call\(\s*['"](?:KEYS|SCAN|SSCAN|HSCAN|ZSCAN)['"]/i);
      // Keys come from KEYS only: a key argument built with `..` would bypass cluster routing.
      expect(code).not.toMatch(/redis\.p?call\(\s*['"]\w+['"]\s*,\s*[^,)]*\.\./);
    });

    it('reads the clock at most once per call', () => {
      expect(body(source).match(/redis\.p?call\(\s*['"]TIME['"]/gi)?.length ?? 0).toBeLessThanOrEqual(1);
    });
  });
});
