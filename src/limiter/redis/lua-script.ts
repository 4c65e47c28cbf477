import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { luaDir } from '../../base/paths';
import type { RedisClient } from './redis-client';

/** A script file from lua/, run with EVALSHA. */
export interface LuaScript {
  /** Runs the script on `keys` (one slot) with `args`; the reply is the script's flat integer array. */
  run(client: RedisClient, keys: readonly string[], args: readonly (string | number)[]): Promise<number[]>;
}

const INCLUDE = /^--\s*@include\b/;
const INCLUDE_EXACT = /^-- @include (lib\/[a-z][a-z0-9_]*\.lua)\s*$/;

/**
 * Replaces every line `-- @include lib/<name>.lua` of a script by the text of
 * `<dir>/lib/<name>.lua`. One level only: an included file must not include. Throws on an
 * include of a missing file and on a malformed or nested include, so a broken script fails at
 * load rather than in Redis.
 */
export function expandLuaIncludes(source: string, dir: string = luaDir, what = 'script'): string {
  return source
    .split('\n')
    .map((line) => {
      if (!INCLUDE.test(line)) return line;
      const path = INCLUDE_EXACT.exec(line)?.[1];
      if (path === undefined) throw new Error(`${what}: malformed include "${line}" (expected "-- @include lib/<name>.lua")`);
      const file = join(dir, path);
      if (!existsSync(file)) throw new Error(`${what}: unknown include ${path} (no ${file})`);
      const lib = readFileSync(file, 'utf8');
      const nested = lib.split('\n').find((l) => INCLUDE.test(l));
      if (nested !== undefined) throw new Error(`${what}: ${path} includes again ("${nested}"); includes are one level deep`);
      return lib.replace(/\n+$/, '');
    })
    .join('\n');
}

/** The text of `lua/<name>.lua` with its includes expanded: what goes to Redis. */
export function readLuaScript(name: string): string {
  return expandLuaIncludes(readFileSync(join(luaDir, `${name}.lua`), 'utf8'), luaDir, `lua/${name}.lua`);
}

/**
 * `<script or sha> <numkeys> <keys...> <args...>` as one array. Arguments are never spread into
 * a call: a merged call has thousands of them, and a spread that large overflows the stack
 * ("Maximum call stack size exceeded").
 */
function commandArgs(script: string, keys: readonly string[], args: readonly (string | number)[]): (string | number)[] {
  const out = new Array<string | number>(2 + keys.length + args.length);
  out[0] = script;
  out[1] = keys.length;
  for (let i = 0; i < keys.length; i++) out[2 + i] = keys[i] as string;
  for (let i = 0; i < args.length; i++) out[2 + keys.length + i] = args[i] as string | number;
  return out;
}

function isNoScript(err: unknown): boolean {
  return err instanceof Error && err.message.startsWith('NOSCRIPT');
}

/**
 * Loads `lua/<name>.lua` once (includes expanded, see expandLuaIncludes; the SHA1 is that of the
 * expanded text) and runs it with EVALSHA; on NOSCRIPT (Redis restarted, failed
 * over or SCRIPT FLUSHed) the same call goes out as EVAL, which also puts the script back into
 * Redis' cache for the next EVALSHA.
 *
 * Plain EVALSHA/EVAL (through `call`, with one argument array) rather than ioredis'
 * defineCommand: ioredis knows where the keys of EVALSHA are, so cluster auto-pipelining sends
 * each call to the node of its first key. For a defined command it takes the first argument
 * instead, the key count ("1", "2"), and put the calls of one tick for every slot into one
 * pipeline that the cluster refused ("All keys in the pipeline should belong to the same slots
 * allocation group").
 */
export function loadLuaScript(name: string): LuaScript {
  const lua = readLuaScript(name);
  const sha = createHash('sha1').update(lua).digest('hex');
  return {
    async run(client, keys, args) {
      try {
        return (await client.call('evalsha', commandArgs(sha, keys, args))) as number[];
      } catch (err) {
        if (!isNoScript(err)) throw err;
        return (await client.call('eval', commandArgs(lua, keys, args))) as number[];
      }
    },
  };
}
