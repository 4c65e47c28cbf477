import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { expandLuaIncludes, readLuaScript } from '../../../src/limiter/redis/lua-script';
import { luaDir } from '../../../src/base/paths';

describe('lua includes', () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'lua-include-'));
  fs.mkdirSync(path.join(tmp, 'lib'));
  fs.writeFileSync(path.join(tmp, 'lib', 'one.lua'), '-- lib/one.lua: one()\nlocal function one() return 1 end\n');
  fs.writeFileSync(path.join(tmp, 'lib', 'nested.lua'), '-- @include lib/one.lua\n');
  afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it('replaces an include line by the lib text, in place', () => {
    const out = expandLuaIncludes('-- header\n\n-- @include lib/one.lua\n\nreturn one()\n', tmp);
    expect(out).toBe('-- header\n\n-- lib/one.lua: one()\nlocal function one() return 1 end\n\nreturn one()\n');
  });

  it('leaves a script without includes as it is', () => {
    const src = '-- no includes\nreturn 1\n';
    expect(expandLuaIncludes(src, tmp)).toBe(src);
  });

  it('throws on an unknown include, naming it', () => {
    expect(() => expandLuaIncludes('-- @include lib/missing.lua\n', tmp, 'lua/x.lua')).toThrow(/lua\/x\.lua: unknown include lib\/missing\.lua/);
  });

  it('throws on a malformed include and on a nested one', () => {
    expect(() => expandLuaIncludes('-- @include ../secret.lua\n', tmp)).toThrow(/malformed include/);
    expect(() => expandLuaIncludes('--@include lib/one.lua\n', tmp)).toThrow(/malformed include/);
    expect(() => expandLuaIncludes('-- @include lib/nested.lua\n', tmp)).toThrow(/one level deep/);
  });

  it('expands the real scripts: the lib code is in what goes to Redis', () => {
    const lib = (name: string) => fs.readFileSync(path.join(luaDir, 'lib', name), 'utf8').trimEnd();
    const gcra = readLuaScript('gcra');
    for (const name of ['int.lua', 'read_call.lua', 'run_call.lua', 'bucket_step.lua']) expect(gcra).toContain(lib(name));
    expect(gcra).not.toMatch(/^--\s*@include/m);
    expect(readLuaScript('fixed_window')).not.toContain('local function bucket_step');
  });
});
