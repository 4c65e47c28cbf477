import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LimitSpec } from '../../src/domain/limit-spec';
import type { LimitResult } from '../../src/limiter/limiter';
import type { AlgorithmState } from '../../src/limiter/memory/memory-algorithm';
import { memoryAlgorithms } from '../../src/limiter/memory/memory-algorithms';
import { algorithmScripts, CALL_PASSES, type CallPass } from '../../src/limiter/redis/algorithm-scripts';
import { readLuaScript } from '../../src/limiter/redis/lua-script';
import { fixedWindowKey } from '../helpers/fixed-window-value';
import { clusterTarget, standaloneTarget, type ScriptClient as Client, type ScriptTarget } from '../helpers/script-targets';
import { ALGORITHM_TRACES, TRACE_START, comparable, randomSteps, seededRandom } from '../helpers/algorithm-traces';

// The scripts that count only admitted hits (uniform layout), as far as they are implemented.
const ALGORITHMS = ['sliding_window', 'token_bucket', 'gcra', 'sliding_log'] as const;
type Name = (typeof ALGORITHMS)[number];

const MODE_EACH: CallPass = 'count';
const MODE_ALL_OR_NOTHING: CallPass = 'stop';
const MODE_LOOK: CallPass = 'look';
// Each script's protocol is the limiter's to speak: its arguments in, its results out.
const SCRIPTS = algorithmScripts();

interface Call {
  hits: number;
  spec: LimitSpec;
}

const sources = Object.fromEntries([...ALGORITHMS, 'fixed_window'].map((a) => [a, readLuaScript(a)]));

/** A loaded script and the client that calls it. */
interface Loaded {
  readonly client: Client;
  readonly sha: string;
}

async function runScript(
  { client, sha }: Loaded,
  keys: readonly string[],
  mode: CallPass,
  calls: readonly Call[],
  now?: number,
): Promise<LimitResult[]> {
  const script = SCRIPTS[calls[0]!.spec.algorithm];
  const checks = calls.map((c) => ({ counter: { domain: 'alg', entries: [] }, spec: c.spec, hits: c.hits }));
  const argv: (string | number)[] = [mode];
  script.pushGroupHeader(argv, checks.length, mode);
  for (const c of checks) script.pushArgs(argv, c);
  if (now !== undefined) argv.push(now);
  const declared = keys.map((k, i) => script.declaredKey(k, checks[i]!, now ?? Date.now()));
  const reply = (await client.evalsha(sha, keys.length, ...declared, ...argv)) as unknown[];
  expect(reply).toHaveLength(script.replyWidth * keys.length);
  for (const v of reply) expect(Number.isInteger(v)).toBe(true);
  return checks.map((c, i) => script.decode(reply as number[], i, c, mode));
}

/** Keys of one call share one hash tag, so they live in one cluster slot. */
function keysFor(n: number): string[] {
  const tag = randomUUID();
  return Array.from({ length: n }, (_, i) => `alg:{${tag}}:${i}`);
}

/** The longest a key of `spec` may live: sliding_window 2 W, the buckets burst × W / limit, the log W. */
function maxTtl(algorithm: Name, spec: LimitSpec): number {
  const w = spec.windowSeconds * 1000;
  if (algorithm === 'sliding_window') return 2 * w;
  if (algorithm === 'sliding_log') return w;
  return Math.ceil((spec.burst * w) / spec.limit);
}

const spec = (algorithm: Name, limit: number, windowSeconds = 3600, burst = limit): LimitSpec => ({ algorithm, limit, windowSeconds, burst });

describe.each([
  ['standalone', () => standaloneTarget(sources)],
  ['cluster', () => clusterTarget(sources)],
] as const)('admitted-hits scripts on %s', (_name, makeTarget) => {
  let t: ScriptTarget;
  beforeAll(async () => {
    t = await makeTarget();
  }, 90_000);
  afterAll(async () => {
    await t?.stop();
  }, 30_000);

  it('token_bucket.lua and gcra.lua answer identically to the same random hits', async () => {
    const random = seededRandom(31);
    let denied = 0;
    for (let round = 0; round < 10; round++) {
      const [tb, gc] = keysFor(2) as [string, string];
      const limit = 1 + random(10);
      const windowSeconds = [1, 3, 60][random(3)]!;
      const burst = 1 + random(10);
      let now = TRACE_START + random(86_400_000);
      for (const st of randomSteps(round, 40, 1200, 4)) {
        now += st.at % 1200;
        const [a] = await runScript(
          { client: t.client, sha: t.sha.token_bucket! },
          [tb],
          MODE_EACH,
          [{ hits: st.hits, spec: spec('token_bucket', limit, windowSeconds, burst) }],
          now,
        );
        const [b] = await runScript(
          { client: t.client, sha: t.sha.gcra! },
          [gc],
          MODE_EACH,
          [{ hits: st.hits, spec: spec('gcra', limit, windowSeconds, burst) }],
          now,
        );
        expect(b).toEqual(a);
        if (!a!.allowed) denied++;
      }
    }
    expect(denied).toBeGreaterThan(20);
  });

  // fixed_window shares the scripted traces; a denial is charged there (every hit counts).
  it.each(ALGORITHM_TRACES.fixed_window.map((tr) => [tr.name, tr] as const))(
    'fixed_window.lua trace "%s": the scripted results; each window\'s key expires when the window after it ends',
    async (_n, trace) => {
      const [key] = keysFor(1) as [string];
      const w = trace.spec.windowSeconds * 1000;
      for (const [i, step] of trace.steps.entries()) {
        const now = TRACE_START + step.at;
        const [result] = await runScript(
          { client: t.client, sha: t.sha.fixed_window! },
          [key],
          MODE_EACH,
          [{ hits: step.hits, spec: trace.spec }],
          now,
        );
        expect(comparable(result!, step.expected), `step ${i} (at ${step.at}, hits ${step.hits})`).toEqual(step.expected);
        if (step.hits > 0) {
          const start = now - (now % w);
          const windowKey = fixedWindowKey(key, trace.spec.windowSeconds, now);
          expect(Number(await t.client.call('PEXPIRETIME', windowKey)), `step ${i}`).toBe(start + 2 * w);
        }
      }
    },
  );

  describe.each(ALGORITHMS)('%s.lua', (algorithm) => {
    const call = (keys: readonly string[], mode: CallPass, calls: readonly Call[], now?: number, client: Client = t.client) =>
      runScript({ client, sha: t.sha[algorithm]! }, keys, mode, calls, now);

    it.each(ALGORITHM_TRACES[algorithm].map((tr) => [tr.name, tr] as const))(
      'trace "%s": the scripted results; the key expires when its state equals a fresh one; peeks and denials change nothing',
      async (_n, trace) => {
        const [key] = keysFor(1) as [string];
        for (const [i, step] of trace.steps.entries()) {
          const now = TRACE_START + step.at;
          const before = await t.client.dump(key);
          const expiryBefore = Number(await t.client.call('PEXPIRETIME', key));
          const [result] = await call([key], MODE_EACH, [{ hits: step.hits, spec: trace.spec }], now);
          expect(comparable(result!, step.expected), `step ${i} (at ${step.at}, hits ${step.hits})`).toEqual(step.expected);
          const expiry = Number(await t.client.call('PEXPIRETIME', key));
          if (step.hits === 0 || !result!.allowed) {
            // Nothing written: same value (or still no key), expiry not moved.
            expect(await t.client.dump(key)).toEqual(before);
            expect(expiry).toBe(expiryBefore);
          } else {
            // Expiry is absolute on the script's clock (pinned here), never later than the state needs.
            expect(expiry, `step ${i}: key without expiry`).toBeGreaterThan(now);
            expect(expiry).toBeLessThanOrEqual(now + maxTtl(algorithm, trace.spec));
          }
          if (before === null && (step.hits === 0 || !result!.allowed)) expect(await t.client.exists(key)).toBe(0);
        }
      },
    );

    it('gives the memory implementation’s results on random traces (pinned time)', async () => {
      const random = seededRandom(99);
      const step = memoryAlgorithms[algorithm];
      for (let round = 0; round < 12; round++) {
        const [key] = keysFor(1) as [string];
        const s = spec(algorithm, random(8), [1, 7, 60][random(3)], 1 + random(8));
        let state: AlgorithmState | undefined;
        let now = TRACE_START + random(86_400_000);
        for (const st of randomSteps(round, 40, 900, 4)) {
          now += st.at % 900;
          if (state !== undefined && state.expiresAt <= now) state = undefined;
          const expected = step.step({ state, spec: s, hits: st.hits, now, pending: 0, charge: true });
          if (expected.next !== undefined) state = expected.next;
          const [got] = await call([key], MODE_EACH, [{ hits: st.hits, spec: s }], now);
          expect(got, `${JSON.stringify(s)} at ${now} hits ${st.hits}`).toEqual(expected.result);
        }
      }
    });

    it('checks several keys of one slot in one call, each with its own rule', async () => {
      const keys = keysFor(3);
      const calls = [
        { hits: 1, spec: spec(algorithm, 1, 1) },
        { hits: 2, spec: spec(algorithm, 10, 60) },
        { hits: 3, spec: spec(algorithm, 2, 3600) },
      ];
      const results = await call(keys, MODE_EACH, calls);
      expect(results.map((r) => [r.allowed, r.used, r.remaining])).toEqual([
        [true, 1, 0],
        [true, 2, 8],
        [false, 0, 2],
      ]);
      for (const [i, key] of keys.entries()) {
        if (i === 2) {
          expect(await t.client.exists(key)).toBe(0);
          continue;
        }
        const ttl = await t.client.pttl(key);
        expect(ttl).toBeGreaterThan(0);
        expect(ttl).toBeLessThanOrEqual(maxTtl(algorithm, calls[i]!.spec));
      }
    });

    it('is atomic: 200 concurrent calls with limit 50 admit exactly 50', async () => {
      const [key] = keysFor(1) as [string];
      // Token bucket and gcra: burst 50 refilled over a day, so no token comes back meanwhile.
      const s = spec(algorithm, 50, 86_400);
      const results = await Promise.all(
        Array.from({ length: 200 }, (_, i) => call([key], MODE_EACH, [{ hits: 1, spec: s }], undefined, t.clients[i % t.clients.length])),
      );
      expect(results.filter(([r]) => r!.allowed)).toHaveLength(50);
      expect((await call([key], MODE_EACH, [{ hits: 0, spec: s }]))[0]).toMatchObject({ used: 50, remaining: 0 });
      // Only admitted hits are logged: the sorted set never holds more than the limit.
      if (algorithm === 'sliding_log') expect(await t.client.zcard(key)).toBe(50);
    });

    it('stop is all or nothing; look never charges', async () => {
      const [loose, tight] = keysFor(2) as [string, string];
      const now = TRACE_START + 1000;
      const L = spec(algorithm, 100);
      const T = spec(algorithm, 2);
      await call([tight], MODE_EACH, [{ hits: 2, spec: T }], now);
      const held = await call(
        [loose, tight],
        MODE_ALL_OR_NOTHING,
        [
          { hits: 5, spec: L },
          { hits: 1, spec: T },
        ],
        now,
      );
      expect(held.map((r) => [r.allowed, r.used, r.remaining])).toEqual([
        [true, 0, 100],
        [false, 2, 0],
      ]);
      expect(held[1]!.retryAfterMs).toBeGreaterThan(0);
      expect(await t.client.exists(loose)).toBe(0);

      const looked = await call(
        [loose, tight],
        MODE_LOOK,
        [
          { hits: 5, spec: L },
          { hits: 0, spec: T },
        ],
        now,
      );
      expect(looked.map((r) => r.allowed)).toEqual([true, true]);
      expect(await t.client.exists(loose)).toBe(0);

      const passed = await call(
        [loose, tight],
        MODE_ALL_OR_NOTHING,
        [
          { hits: 5, spec: L },
          { hits: 0, spec: T },
        ],
        now,
      );
      expect(passed.map((r) => [r.allowed, r.used])).toEqual([
        [true, 5],
        [true, 2],
      ]);
      expect(await t.client.pttl(loose)).toBeGreaterThan(0);

      // Under concurrency, all-or-nothing lets exactly the tighter limit through on both keys.
      const [a, b] = keysFor(2) as [string, string];
      const results = await Promise.all(
        Array.from({ length: 120 }, (_, i) =>
          call(
            [a, b],
            MODE_ALL_OR_NOTHING,
            [
              { hits: 1, spec: spec(algorithm, 100, 86_400) },
              { hits: 1, spec: spec(algorithm, 30, 86_400) },
            ],
            undefined,
            t.clients[i % 4],
          ),
        ),
      );
      expect(results.filter((r) => r.every((x) => x.allowed))).toHaveLength(30);
      const peek = await call([a, b], MODE_EACH, [
        { hits: 0, spec: spec(algorithm, 100, 86_400) },
        { hits: 0, spec: spec(algorithm, 30, 86_400) },
      ]);
      expect(peek.map((r) => r.used)).toEqual([30, 30]);
    });

    it('rejects malformed arguments with a clear error and touches nothing', async () => {
      const [key] = keysFor(1) as [string];
      const sha = t.sha[algorithm]!;
      await expect(t.client.evalsha(sha, 1, key, 'count', 1, 10, 60)).rejects.toThrow(
        new RegExp(`${algorithm}: 1 keys need 5 or 6 ARGV, got 4`),
      );
      await expect(t.client.evalsha(sha, 1, key, 'count', 'x', 10, 60, 10)).rejects.toThrow(/key 1 needs integer hits/);
      await expect(t.client.evalsha(sha, 1, key, 'count', 1.5, 10, 60, 10)).rejects.toThrow(/key 1 needs integer hits/);
      await expect(t.client.evalsha(sha, 1, key, 'count', 1, 10, 0, 10)).rejects.toThrow(/window >= 1/);
      await expect(t.client.evalsha(sha, 1, key, 'count', 1, 10, 60, -1)).rejects.toThrow(/burst >= 0/);
      await expect(t.client.evalsha(sha, 1, key, 3, 1, 10, 60, 10)).rejects.toThrow(/mode \(ARGV\[1\]\)/);
      await expect(t.client.evalsha(sha, 1, key, 'count', 1, 10, 60, 10, 'soon')).rejects.toThrow(/pinned now/);
      expect(await t.client.exists(key)).toBe(0);
    });

    it('leaves no key without a TTL after a random load on the real clock', async () => {
      const groups = Array.from({ length: 15 }, () => keysFor(3));
      const random = seededRandom(42);
      await Promise.all(
        Array.from({ length: 300 }, (_, i) => {
          const keys = groups[random(groups.length)]!;
          const calls = keys.map(() => ({ hits: random(4), spec: spec(algorithm, random(20), [1, 60, 3600][random(3)], 1 + random(20)) }));
          return call(keys, CALL_PASSES[random(3)]!, calls, undefined, t.clients[i % 4]);
        }),
      );
      const prefix = 'alg:{';
      const mine = new Set(groups.flat());
      const all = (await t.allKeys()).filter((k) => k.startsWith(prefix) && mine.has(k));
      expect(all.length).toBeGreaterThan(0);
      const ttls = await Promise.all(all.map((k) => t.client.pttl(k)));
      // -2: a key that expired since KEYS ran, which is fine; -1 would be a key without TTL.
      // The longest TTL the load can ask for: buckets burst 20 at 1 per hour, the others two hours.
      const longest = algorithm === 'token_bucket' || algorithm === 'gcra' ? 20 * 3_600_000 : 2 * 3_600_000;
      expect(all.filter((_, i) => ttls[i] === -1 || ttls[i]! > longest)).toEqual([]);
    });
  });
});
