// Issue 21 on a standalone Redis and a 3-master cluster: the list suite the memory backend runs
// (test/helpers/limit-list-suite.ts), through RedisLimiter and lua/limit_list.lua, one atomic
// call per list on the descriptor's hash tag; then lua/limit_list.lua's protocol itself (several
// lists in one call, each all or nothing, in order; its errors), and concurrent requests whose
// lists share counters, on the real clock, merged into few script calls.
import { randomUUID } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import type { LimitSpec } from '../../src/domain/limit-spec';
import type { LimitCheck, LimitResult } from '../../src/limiter/limiter';
import type { CallMode } from '../../src/limiter/redis/algorithm-scripts';
import { loadLuaScript } from '../../src/limiter/redis/lua-script';
import { RedisLimiter } from '../../src/limiter/redis/redis-limiter';
import { seededRandom } from '../helpers/algorithm-traces';
import { limitListSuite, T0 } from '../helpers/limit-list-suite';
import { standaloneAndCluster } from '../helpers/standalone-and-cluster';
import { awayFromWindowEdge } from '../helpers/windows';

/** lua/limit_list.lua's number for each algorithm. */
const ALG = { fixed_window: 1, sliding_window: 2, token_bucket: 3, gcra: 4, sliding_log: 5 } as const;

/** One limit of a list as the script takes it: its counter's name (suffix of the key) and its five ARGV. */
interface Limit {
  readonly name: string;
  readonly algorithm: keyof typeof ALG;
  readonly limit: number;
  readonly windowSeconds: number;
  readonly burst: number;
}

/** KEYS and ARGV of one limit_list call of `lists` (each with its hits) on the counters of hash tag `tag`. */
function listCall(tag: string, mode: CallMode, lists: readonly { limits: readonly Limit[]; hits: number }[], now?: number) {
  const keys: string[] = [];
  const args: (number | string)[] = [mode];
  for (const { limits, hits } of lists) {
    args.push(limits.length);
    for (const l of limits) {
      keys.push(`ll:{${tag}}:${l.name}`);
      args.push(ALG[l.algorithm], hits, l.limit, l.windowSeconds, l.burst);
    }
  }
  if (now !== undefined) args.push(now);
  return { keys, args };
}

const script = loadLuaScript('limit_list');

/**
 * The layout errors both list scripts share (lua/lib/read_lists.lua), for `name` run by `run`,
 * whose keys take the ARGV `one` each; `k` names a counter of the test's hash tag.
 */
async function expectLayoutErrors(
  name: string,
  run: (keys: string[], args: (number | string)[]) => Promise<unknown>,
  one: readonly (number | string)[],
  k: (s: string) => string,
): Promise<void> {
  const w = one.length;
  const refused = (keys: string[], args: (number | string)[], message: string) =>
    expect(run(keys, args), message).rejects.toThrow(`ERR ${name}: ${message}`);
  await refused([k('a')], ['stop', 1, ...one], "mode (ARGV[1]) must be one of 'count', 'look', 'count:named', got 'stop'");
  // count:named (a cluster node's merged call) declares one key and names the counters in ARGV.
  await refused([k('a'), k('b')], ['count:named', 1, k('a'), ...one], 'mode count:named declares 1 key (it routes the call), got 2');
  await refused([k('a')], ['count:named'], 'mode count:named needs at least one list after the mode');
  await refused([k('a')], ['count', 0, ...one], 'list 1: key count (ARGV[2]) must be a whole number >= 1');
  await refused([k('a')], ['count', 1.5, ...one], 'list 1: key count (ARGV[2]) must be a whole number >= 1');
  // A count that runs past the keys, and one that runs past the ARGV.
  await refused([k('a'), k('b')], ['count', 3, ...one, ...one, ...one], 'list 1: 3 keys from KEYS[1] run past the 2 keys');
  await refused([k('a'), k('b')], ['count', 1, ...one, 2, ...one], 'list 2: 2 keys from KEYS[2] run past the 2 keys');
  await refused(
    [k('a'), k('b')],
    ['count', 2, ...one, ...one.slice(1)],
    `list 1: 2 keys need ARGV[3..${2 + 2 * w}], the call has ${2 * w + 1} ARGV`,
  );
  // After the lists, only a pinned now may follow.
  await refused([k('a')], ['count', 1, ...one, T0, 7], `the lists end at ARGV[${2 + w}]; only a pinned now may follow them, got 2 ARGV`);
  await refused([k('a')], ['count', 1, ...one, -5], 'pinned now (last ARGV) must be epoch milliseconds');
  // One counter twice in one list would be judged twice against one state: refused. (In two
  // lists it is fine.)
  await refused([k('a'), k('b'), k('b')], ['count', 1, ...one, 2, ...one, ...one], 'list 2 holds one counter twice (KEYS[2] and KEYS[3])');
  expect(await run([], ['count'])).toEqual([]);
}

describe.each(standaloneAndCluster())('rate_limits lists on %s', (name, connect) => {
  /** A test body with a client of its own, disconnected after it. */
  const withClient = (body: (client: ReturnType<typeof connect>) => Promise<void>) => async () => {
    const client = connect();
    try {
      await body(client);
    } finally {
      client.disconnect();
    }
  };
  let n = 0;
  const run = Date.now().toString(36);
  limitListSuite(
    { limiter: (now) => new RedisLimiter({ client: connect(), keyPrefix: `list_${name}_${run}_`, pinnedNow: now }) },
    () => `k${++n}`,
  );

  describe('lua/limit_list.lua: several lists in one call', () => {
    const shared: Limit = { name: 'shared', algorithm: 'fixed_window', limit: 1, windowSeconds: 60, burst: 1 };
    const x: Limit = { name: 'x', algorithm: 'token_bucket', limit: 5, windowSeconds: 60, burst: 5 };
    const y: Limit = { name: 'y', algorithm: 'sliding_log', limit: 5, windowSeconds: 60, burst: 5 };

    test(
      'lists are decided in order, each all or nothing: a later list sees what an earlier one charged',
      withClient(async (client) => {
        const tag = randomUUID();
        const now = T0 + 1000;
        // List 1 takes the shared counter's only hit; list 2 is then denied by it, and its y is not charged.
        const { keys, args } = listCall(
          tag,
          'count',
          [
            { limits: [shared, x], hits: 1 },
            { limits: [shared, y], hits: 1 },
          ],
          now,
        );
        const reply = await script.run(client, keys, args);
        expect(reply).toHaveLength(6 * 4);
        const denied = (k: number) => reply[6 * k + 4];
        const used = (k: number) => reply[6 * k];
        expect([denied(0), denied(1), denied(2), denied(3)]).toEqual([0, 0, 1, 0]);
        expect([used(0), used(1), used(2), used(3)]).toEqual([1, 1, 1, 0]);
        // The state is that of two separate calls in that order.
        const peek = listCall(tag, 'look', [{ limits: [shared, x, y], hits: 0 }], now);
        const looked = await script.run(client, peek.keys, peek.args);
        expect([looked[0], looked[6], looked[12]]).toEqual([1, 1, 0]);
      }),
    );

    test(
      'one merged call of random lists that share counters answers and stores as separate calls in that order',
      withClient(async (client) => {
        const pool: Limit[] = [
          { name: 'fw1', algorithm: 'fixed_window', limit: 3, windowSeconds: 1, burst: 3 },
          { name: 'fw60', algorithm: 'fixed_window', limit: 6, windowSeconds: 60, burst: 6 },
          { name: 'sw', algorithm: 'sliding_window', limit: 5, windowSeconds: 2, burst: 5 },
          { name: 'tb', algorithm: 'token_bucket', limit: 4, windowSeconds: 2, burst: 4 },
          { name: 'gcra', algorithm: 'gcra', limit: 3, windowSeconds: 1, burst: 3 },
          { name: 'log', algorithm: 'sliding_log', limit: 4, windowSeconds: 2, burst: 4 },
        ];
        const random = seededRandom(2111);
        const merged = randomUUID();
        const separate = randomUUID();
        let now = T0 + 5000;
        let denials = 0;
        for (let round = 0; round < 60; round++) {
          now += random(700);
          const mode: CallMode = random(10) < 2 ? 'look' : 'count';
          const lists = Array.from({ length: 1 + random(6) }, () => {
            const picked = new Set<Limit>();
            const size = 1 + random(3);
            while (picked.size < size) picked.add(pool[random(pool.length)]!);
            return { limits: [...picked], hits: random(4) };
          });
          const one = listCall(merged, mode, lists, now);
          const mergedReply = await script.run(client, one.keys, one.args);
          const separateReply: number[] = [];
          for (const list of lists) {
            const own = listCall(separate, mode, [list], now);
            separateReply.push(...(await script.run(client, own.keys, own.args)));
          }
          expect(mergedReply, `round ${round}: ${JSON.stringify(lists.map((l) => [l.hits, l.limits.map((m) => m.name)]))}`).toEqual(
            separateReply,
          );
          for (let k = 4; k < mergedReply.length; k += 6) denials += mergedReply[k]!;
        }
        // The trace denies often enough to mean something.
        expect(denials).toBeGreaterThan(30);
      }),
    );

    test(
      'malformed calls are refused with a clear error, and nothing is charged',
      withClient(async (client) => {
        const tag = randomUUID();
        const k = (s: string) => `ll:{${tag}}:${s}`;
        const one = [ALG.fixed_window, 1, 10, 60, 10];
        const bad = (keys: string[], args: (number | string)[]) => script.run(client, keys, args);
        await expectLayoutErrors('limit_list', bad, one, k);
        await expect(bad([k('a'), k('b')], ['count', 1, ...one, 1, 6, 1, 10, 60, 10])).rejects.toThrow(
          'ERR limit_list: key 2 needs algorithm 1..5, integer hits >= 0, limit >= 0, window >= 1, burst >= 0 (ARGV[9..13])',
        );
        // A valid first list before a malformed second one: the call is refused before anything runs.
        await expect(bad([k('a'), k('b')], ['count', 1, ...one, 1, ALG.fixed_window, -1, 10, 60, 10])).rejects.toThrow(
          'ERR limit_list: key 2 needs',
        );
        // Hits go to INCRBY as written: only plain decimal digits are taken.
        for (const written of ['1.0', '01', '1e0']) {
          await expect(bad([k('a'), k('b')], ['count', 1, ...one, 1, ALG.fixed_window, written, 10, 60, 10]), written).rejects.toThrow(
            'ERR limit_list: key 2 needs',
          );
        }
        expect(await client.exists(k('a'), k('b'))).toBe(0);
      }),
    );
  });

  describe('lua/fixed_window_list.lua: lists of fixed windows only, in the lean protocol', () => {
    const fwl = loadLuaScript('fixed_window_list');
    /** A fixed window of a list: its counter's name and its limit and window. */
    type Window = { readonly name: string; readonly limit: number; readonly windowSeconds: number };
    /** KEYS and ARGV of one fixed_window_list call of `lists` at `now`: each key its window's key, as RedisLimiter declares it. */
    const fwlCall = (tag: string, mode: CallMode, lists: readonly { limits: readonly Window[]; hits: number }[], now: number) => {
      const keys: string[] = [];
      const args: (number | string)[] = [mode];
      for (const { limits, hits } of lists) {
        args.push(limits.length);
        for (const l of limits) {
          keys.push(`ll:{${tag}}:${l.name}:fixed_window:${l.windowSeconds}:${(now - (now % (l.windowSeconds * 1000))) / 1000}`);
          args.push(hits, l.limit, l.windowSeconds);
        }
      }
      args.push(now);
      return { keys, args };
    };

    test(
      'random merged calls answer and store as separate calls in that order, and as lua/limit_list.lua decides the same lists',
      withClient(async (client) => {
        const pool: Window[] = [
          { name: 'a', limit: 3, windowSeconds: 1 },
          { name: 'b', limit: 5, windowSeconds: 2 },
          { name: 'c', limit: 8, windowSeconds: 60 },
          { name: 'd', limit: 12, windowSeconds: 3600 },
        ];
        const random = seededRandom(2112);
        const [merged, separate, general] = [randomUUID(), randomUUID(), randomUUID()];
        let now = T0 + 7000;
        let denials = 0;
        let charged = 0;
        for (let round = 0; round < 80; round++) {
          now += random(900);
          const mode: CallMode = random(10) < 2 ? 'look' : 'count';
          const lists = Array.from({ length: 1 + random(6) }, () => {
            const picked = new Set<Window>();
            const size = 1 + random(3);
            while (picked.size < size) picked.add(pool[random(pool.length)]!);
            return { limits: [...picked], hits: random(4) };
          });
          const what = `round ${round}: ${JSON.stringify(lists.map((l) => [l.hits, l.limits.map((m) => m.name)]))}`;
          const one = fwlCall(merged, mode, lists, now);
          const mergedReply = await fwl.run(client, one.keys, one.args);
          const separateReply: number[] = [];
          for (const list of lists) {
            const own = fwlCall(separate, mode, [list], now);
            separateReply.push(...(await fwl.run(client, own.keys, own.args)));
          }
          expect(mergedReply, what).toEqual(separateReply);
          // lua/limit_list.lua on the same lists: the same counts, denials and resets.
          const theirs = listCall(
            general,
            mode,
            lists.map((l) => ({ limits: l.limits.map((w) => ({ ...w, algorithm: 'fixed_window' as const, burst: 0 })), hits: l.hits })),
            now,
          );
          const generalReply = await script.run(
            client,
            theirs.keys.map((k, i) => `${k}:fixed_window:x:${one.keys[i]!.split(':').at(-1)}`),
            theirs.args,
          );
          const decoded: [number, number, number][] = [];
          let k = 0;
          for (const list of lists) {
            for (const w of list.limits) {
              const [count, reset] = [mergedReply[2 * k]!, mergedReply[2 * k + 1]!];
              decoded.push([count, reset < 0 && count + list.hits > w.limit ? 1 : 0, Math.abs(reset)]);
              if (reset > 0 && list.hits > 0) charged++;
              k++;
            }
          }
          const generalDecoded = decoded.map((_, j) => [generalReply[6 * j]!, generalReply[6 * j + 4]!, generalReply[6 * j + 2]!]);
          expect(decoded, what).toEqual(generalDecoded);
          denials += decoded.filter(([, denied]) => denied === 1).length;
        }
        // The trace both refuses and charges often enough to mean something.
        expect(denials).toBeGreaterThan(30);
        expect(charged).toBeGreaterThan(30);
      }),
    );

    test(
      'a list is refused at its first limit that would go over: the counters after it are only read, the charges before it taken back',
      withClient(async (client) => {
        const tag = randomUUID();
        const now = T0 + 3000;
        const [second, minute, hour]: Window[] = [
          { name: 's', limit: 10, windowSeconds: 1 },
          { name: 'm', limit: 2, windowSeconds: 60 },
          { name: 'h', limit: 100, windowSeconds: 3600 },
        ];
        const call = (hits: number) => fwlCall(tag, 'count', [{ limits: [second!, minute!, hour!], hits }], now);
        const first = call(2);
        // Admitted: each count after the charge, each reset positive.
        expect(await fwl.run(client, first.keys, first.args)).toEqual([2, 1000, 2, 57_000, 2, 3_597_000]);
        // Refused by the minute (2 + 1 > 2): nothing charged, each count as it stood, resets negative.
        const again = call(1);
        expect(await fwl.run(client, again.keys, again.args)).toEqual([2, -1000, 2, -57_000, 2, -3_597_000]);
        expect(await client.mget(...first.keys)).toEqual(['2', '2', '2']);
        // A look charges nothing either, also when every limit admits.
        const look = fwlCall(tag, 'look', [{ limits: [second!, hour!], hits: 1 }], now);
        expect(await fwl.run(client, look.keys, look.args)).toEqual([2, -1000, 2, -3_597_000]);
        expect(await client.mget(...first.keys)).toEqual(['2', '2', '2']);
      }),
    );

    test(
      "a refused list keeps an older floodgate's count that a window's first hit carried over, with the window's expiry; both list scripts",
      withClient(async (client) => {
        const tag = randomUUID();
        const hourMs = 3_600_000;
        const start = Math.ceil(Date.now() / hourMs) * hourMs;
        const now = start + 10;
        // The hour's counter (an older floodgate's plain integer, 5) comes first in the list, so
        // it is charged before the minute (1 of 1 already) refuses the list.
        const hour: Window = { name: 'h', limit: 100, windowSeconds: 3600 };
        const minute: Window = { name: 'm', limit: 1, windowSeconds: 60 };
        const lists = [{ limits: [hour, minute], hits: 1 }];
        const fw = fwlCall(tag, 'count', lists, now);
        const general = listCall(
          `${tag}-g`,
          'count',
          lists.map((l) => ({ limits: l.limits.map((w) => ({ ...w, algorithm: 'fixed_window' as const, burst: 0 })), hits: l.hits })),
          now,
        );
        const generalKeys = general.keys.map((key, i) => `${key}:fixed_window:x:${fw.keys[i]!.split(':').at(-1)}`);
        for (const [keys, run] of [
          [fw.keys, (args: (number | string)[]) => fwl.run(client, fw.keys, args)],
          [generalKeys, (args: (number | string)[]) => script.run(client, generalKeys, args)],
        ] as const) {
          const base = keys[0]!.replace(/:\d+$/, '');
          await client.set(base, '5');
          await client.set(keys[1]!, '1', 'PXAT', start + 120_000);
          await run(keys === fw.keys ? fw.args : general.args);
          // Refused: the hour's window key holds the carried 5 and nothing of this call, with the
          // expiry of a window key; the old value is taken (a plain integer counts once).
          expect(await client.mget(keys[0]!, keys[1]!, base), String(keys[0])).toEqual(['5', '1', null]);
          expect(await client.call('PEXPIRETIME', keys[0]!)).toBe(start + 2 * hourMs);
        }
      }),
    );

    test(
      'malformed calls are refused with a clear error, and nothing is charged',
      withClient(async (client) => {
        const tag = randomUUID();
        const k = (s: string) => `ll:{${tag}}:${s}`;
        const one = [1, 10, 60];
        const bad = (keys: string[], args: (number | string)[]) => fwl.run(client, keys, args);
        await expectLayoutErrors('fixed_window_list', bad, one, k);
        // A valid first list before a malformed second one: refused before anything runs.
        for (const written of ['1.0', '01', '1e0', '-1']) {
          await expect(bad([k('a'), k('b')], ['count', 1, ...one, 1, written, 10, 60]), written).rejects.toThrow(
            'ERR fixed_window_list: key 2 needs integer hits >= 0, limit >= 0, window >= 1 (ARGV[7..9])',
          );
        }
        await expect(bad([k('a'), k('b')], ['count', 1, ...one, 1, 1, 10, 0])).rejects.toThrow('ERR fixed_window_list: key 2 needs');
        expect(await client.exists(k('a'), k('b'))).toBe(0);
      }),
    );
  });

  test.each([
    ['limit_list', 'token_bucket', 'gcra'],
    ['fixed_window_list', 'fixed_window', 'fixed_window'],
  ] as const)(
    '200 concurrent requests whose lists share a counter, on the real clock: few %s calls, exact counts, all or nothing',
    async (scriptName, ownA, ownB) => {
      const calls: string[] = [];
      const limiter = new RedisLimiter({
        client: connect(),
        keyPrefix: `listc_${name}_${run}_`,
        observer: { scriptCall: (s) => calls.push(s), refused: () => undefined },
      });
      try {
        for (let i = 0; i < 250 && !limiter.isHealthy(); i++) await new Promise((r) => setTimeout(r, 20));
        // The shared hour's fixed window must not roll over during the burst.
        await awayFromWindowEdge(3600, 10_000);
        const counter = { domain: 'listc', entries: [{ key: 'k', value: randomUUID() }] };
        // List A = [shared 50/h, a 30/day], list B = [shared 50/h, b 40/2 days]: a and b would
        // admit 70, the shared hour admits 50, so exactly 50 lists are admitted, whatever their order.
        const shared: LimitSpec = { algorithm: 'fixed_window', limit: 50, windowSeconds: 3600, burst: 50 };
        const a: LimitSpec = { algorithm: ownA, limit: 30, windowSeconds: 86_400, burst: 30 };
        const b: LimitSpec = { algorithm: ownB, limit: 40, windowSeconds: 172_800, burst: 40 };
        const list = (own: LimitSpec, hits = 1): LimitCheck[] => [
          { counter, spec: shared, hits, listSize: 2 },
          { counter, spec: own, hits },
        ];
        // A, B, or both in one request (two lists of one request that share a counter).
        const requests = Array.from({ length: 200 }, (_, i) => (i % 3 === 0 ? list(a) : i % 3 === 1 ? list(b) : [...list(a), ...list(b)]));
        const options = { deadline: Date.now() + 10_000, stopIncrementWhenOverLimit: false };
        const answers = await Promise.all(requests.map((r) => limiter.check(r, options)));
        const listCalls = calls.filter((s) => s === scriptName).length;

        const admitted = { shared: [] as number[], a: [] as number[], b: [] as number[] };
        answers.forEach((results, r) => {
          const checks = requests[r]!;
          for (let at = 0; at < checks.length; at += 2) {
            const [first, second] = [results[at] as LimitResult, results[at + 1] as LimitResult];
            // The list's own limit admits iff it had room; when both admit the list is charged.
            if (first.allowed && second.allowed) {
              admitted.shared.push(first.used);
              (checks[at + 1]!.spec === a ? admitted.a : admitted.b).push(second.used);
            }
          }
        });
        const ints = (k: number) => Array.from({ length: k }, (_, i) => i + 1);
        const sorted = (xs: number[]) => [...xs].sort((p, q) => p - q);
        // Every admitted list took the next hit of each of its counters: each count once.
        expect(sorted(admitted.shared)).toEqual(ints(50));
        expect(sorted(admitted.a)).toEqual(ints(admitted.a.length));
        expect(sorted(admitted.b)).toEqual(ints(admitted.b.length));
        expect(admitted.a.length).toBeLessThanOrEqual(30);
        expect(admitted.b.length).toBeLessThanOrEqual(40);
        // Denied lists charged nothing: the counters hold exactly the admitted lists.
        const peek = async (spec: LimitSpec) => (await limiter.check([{ counter, spec, hits: 0 }], options))[0]!.used;
        expect(await peek(shared)).toBe(50);
        expect(await peek(a)).toBe(admitted.a.length);
        expect(await peek(b)).toBe(admitted.b.length);
        // Merged: far fewer script calls than the 266 lists (a NOSCRIPT retry is the same call).
        console.info(`lists (${name}): 200 requests, 266 lists, ${listCalls} ${scriptName} calls`);
        expect(listCalls).toBeGreaterThan(0);
        expect(listCalls).toBeLessThanOrEqual(10);
      } finally {
        await limiter.close();
      }
    },
  );
});
