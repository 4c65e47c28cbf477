import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { luaDir } from '../../paths';
import type { RedisClient } from './redis-client';

/** A script file from lua/, run with EVALSHA. */
export interface LuaScript {
  /** Runs the script on `keys` (one slot) with `args`; the reply is the script's flat integer array. */
  run(client: RedisClient, keys: readonly string[], args: readonly (string | number)[]): Promise<number[]>;
}

function isNoScript(err: unknown): boolean {
  return err instanceof Error && err.message.startsWith('NOSCRIPT');
}

/**
 * Loads `lua/<name>.lua` once and runs it with EVALSHA; on NOSCRIPT (Redis restarted, failed
 * over or SCRIPT FLUSHed) the same call goes out as EVAL, which also puts the script back into
 * Redis' cache for the next EVALSHA.
 *
 * Plain EVALSHA/EVAL rather than ioredis' defineCommand: ioredis knows where the keys of
 * EVALSHA are, so cluster auto-pipelining sends each call to the node of its first key. For a
 * defined command it takes the first argument instead, the key count ("1", "2"), and put the
 * calls of one tick for every slot into one pipeline that the cluster refused ("All keys in the
 * pipeline should belong to the same slots allocation group").
 */
export function loadLuaScript(name: string): LuaScript {
  const lua = readFileSync(join(luaDir, `${name}.lua`), 'utf8');
  const sha = createHash('sha1').update(lua).digest('hex');
  return {
    async run(client, keys, args) {
      try {
        return (await client.evalsha(sha, keys.length, ...keys, ...args)) as number[];
      } catch (err) {
        if (!isNoScript(err)) throw err;
        return (await client.eval(lua, keys.length, ...keys, ...args)) as number[];
      }
    },
  };
}
