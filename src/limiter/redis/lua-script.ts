import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { luaDir } from '../../paths';
import type { RedisClient } from './redis-client';

/** A script file from lua/, registered on a client as one ioredis command. */
export interface LuaScript {
  /** Runs the script on `keys` (one slot) with `args`; the reply is the script's flat integer array. */
  run(client: RedisClient, keys: readonly string[], args: readonly (string | number)[]): Promise<number[]>;
}

type Runner = (...keysAndArgs: (string | number)[]) => Promise<number[]>;

/**
 * Loads `lua/<name>.lua` once. ioredis' defineCommand sends EVALSHA and, on NOSCRIPT (Redis
 * restarted, failed over or SCRIPT FLUSHed), falls back to EVAL transparently, which also loads
 * the script again for the next EVALSHA.
 *
 * The command is defined once per key count, with a fixed `numberOfKeys`, so that the caller
 * passes the keys first: ioredis' cluster auto-pipelining picks a command's node from its first
 * argument, and a leading key count ("1", "2") would send the calls of one tick for every slot
 * into the one pipeline of the node that owns the slot of "1", which the cluster then refuses
 * ("All keys in the pipeline should belong to the same slots allocation group").
 */
export function loadLuaScript(name: string): LuaScript {
  const lua = readFileSync(join(luaDir, `${name}.lua`), 'utf8');
  const defined = new WeakMap<RedisClient, Set<number>>();
  return {
    run(client, keys, args) {
      const command = `floodgate_${name}_${keys.length}`;
      let counts = defined.get(client);
      if (counts === undefined) defined.set(client, (counts = new Set()));
      if (!counts.has(keys.length)) {
        client.defineCommand(command, { lua, numberOfKeys: keys.length });
        counts.add(keys.length);
      }
      const runner = (client as unknown as Record<string, Runner>)[command] as Runner;
      return runner.call(client, ...keys, ...args);
    },
  };
}
