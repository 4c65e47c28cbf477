// Every counting script takes its mode by name in ARGV[1] (lua/lib/read_mode.lua), the names the
// limiter sends (CALL_PASSES, NAMED in src/limiter/redis/algorithm-scripts.ts). A name a script
// does not take (a typo, another script's mode, the numbers of the old protocol) is refused with
// an error that says which names it takes, before anything is read or written.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { readLuaScript } from '../../src/limiter/redis/lua-script';
import { standaloneTarget, type ScriptTarget } from '../helpers/script-targets';

interface Case {
  /** The names the script takes, in the order its refusal lists them. */
  readonly takes: readonly string[];
  /** A name it takes, and a well-formed call's ARGV after the mode, one counter of 1 hit (limit 10, 60 s). */
  readonly valid: string;
  readonly argv: readonly (number | string)[];
  /** Names it does not take, besides the common ones below. */
  readonly foreign: readonly string[];
}

const READ_CALL: Case = { takes: ['count', 'stop', 'look'], valid: 'count', argv: [1, 10, 60, 10], foreign: ['count:named', 'stop:named'] };
const LISTS = ['count', 'look', 'count:named'];
const CASES: Readonly<Record<string, Case>> = {
  fixed_window: {
    takes: ['count', 'stop', 'look', 'count:named', 'stop:named', 'look:named'],
    valid: 'count',
    argv: [1, 10, 60],
    foreign: ['named', 'count:named:named'],
  },
  reference_window: {
    takes: ['count', 'stop', 'look', 'count:named', 'stop:named', 'look:named'],
    valid: 'count',
    argv: [1, 10, 60, 60],
    foreign: ['named', 'count:named:named'],
  },
  fixed_window_list: { takes: LISTS, valid: 'count', argv: [1, 1, 10, 60], foreign: ['stop', 'look:named'] },
  limit_list: { takes: LISTS, valid: 'count', argv: [1, 1, 1, 10, 60, 0], foreign: ['stop', 'stop:named'] },
  stop_request: { takes: ['stop', 'stop:named'], valid: 'stop', argv: [1, 0, 1, 1, 10, 60, 0], foreign: ['count', 'look'] },
  sliding_window: READ_CALL,
  token_bucket: READ_CALL,
  gcra: READ_CALL,
  sliding_log: READ_CALL,
};
// A typo, another case, a padded name, the old protocol's numbers, nothing at all.
const UNKNOWN = ['counts', 'COUNT', ' count', 'count:', '0', '1', '3', ''];

let t: ScriptTarget;

beforeAll(async () => {
  t = await standaloneTarget(Object.fromEntries(Object.keys(CASES).map((name) => [name, readLuaScript(name)])));
}, 60_000);
afterAll(async () => {
  await t?.stop();
});
beforeEach(async () => {
  await t.client.flushall();
});

describe.each(Object.entries(CASES))('lua/%s.lua', (name, c) => {
  it('refuses a mode name it does not take with an error listing the names it takes, and writes nothing', async () => {
    const key = `modes:{${randomUUID()}}:a`;
    const takes = c.takes.map((n) => `'${n}'`).join(', ');
    for (const mode of [...UNKNOWN, ...c.foreign]) {
      await expect(t.client.evalsha(t.sha[name]!, 1, key, mode, ...c.argv), mode).rejects.toThrow(
        `ERR ${name}: mode (ARGV[1]) must be one of ${takes}, got '${mode}'`,
      );
    }
    expect(await t.allKeys()).toEqual([]);
    // The same call with a name it takes counts (so the refusals above were the name's).
    await t.client.evalsha(t.sha[name]!, 1, key, c.valid, ...c.argv);
    expect((await t.allKeys()).length).toBeGreaterThan(0);
  });
});
