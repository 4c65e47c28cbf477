import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { luaDir } from '../../paths';
import type { RedisClient } from './redis-client';

/** A script file from lua/, registered on a client as one ioredis command. */
export interface LuaScript {
  /** Runs the script on `keys` (one slot) with `args`; the reply is the script's flat integer array. */
  run(client: RedisClient, keys: readonly string[], args: readonly (string | number)[]): Promise<number[]>;
}

type Runner = (numKeys: number, ...keysAndArgs: (string | number)[]) => Promise<number[]>;

/**
 * Loads `lua/<name>.lua` once. ioredis' defineCommand sends EVALSHA and, on NOSCRIPT (Redis
 * restarted, failed over or SCRIPT FLUSHed), falls back to EVAL transparently, which also loads
 * the script again for the next EVALSHA.
 */
export function loadLuaScript(name: string): LuaScript {
  const lua = readFileSync(join(luaDir, `${name}.lua`), 'utf8');
  const command = `floodgate_${name}`;
  const defined = new WeakSet<RedisClient>();
  return {
    run(client, keys, args) {
      if (!defined.has(client)) {
        client.defineCommand(command, { lua });
        defined.add(client);
      }
      const runner = (client as unknown as Record<string, Runner>)[command] as Runner;
      return runner.call(client, keys.length, ...keys, ...args);
    },
  };
}
