// Concurrent requests' fixed-window calls to one slot are merged into one script call, and so
// are their `rate_limits` lists (lua/limit_list.lua takes several lists per call); every
// request still gets exactly the answer its own call would have given.
import Redis, { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { LimitCheck } from '../../src/limiter/limiter';
import { DEFAULT_MAX_KEYS_PER_CALL } from '../../src/limiter/redis/call-coalescer';
import { RedisLimiter } from '../../src/limiter/redis/redis-limiter';
import { checkKey } from '../../src/limiter/counter-key';
import { keySlot, startCluster, startStandalone, type RedisClusterHarness, type RedisProcess } from '../harness/redis-servers';
import { awayFromWindowEdge, CountingBreaker, scriptCalls } from './redis-backend-helpers';
import { within } from '../harness/wait';

const spec = { algorithm: 'fixed_window' as const, limit: 50, windowSeconds: 3600, burst: 50 };
const check = (value: string, hits = 1): LimitCheck => ({ counter: { domain: 'co', entries: [{ key: 'k', value }] }, spec, hits });

let standalone: RedisProcess;
let cluster: RedisClusterHarness;
beforeAll(async () => {
  [standalone, cluster] = await Promise.all([startStandalone(), startCluster()]);
});
afterAll(async () => {
  await Promise.all([standalone?.stop(), cluster?.stop()]);
});

describe.each([
  ['standalone', () => new Redis({ host: standalone.host, port: standalone.port, enableAutoPipelining: true }), () => [standalone]],
  [
    'cluster',
    () => new Cluster(cluster.startupNodes as { host: string; port: number }[], { enableAutoPipelining: true }),
    () => cluster.masters(),
  ],
] as const)('on %s', (name, connect, nodes) => {
  let limiter: RedisLimiter;
  let limited: RedisLimiter;
  let windowed: RedisLimiter;
  beforeAll(async () => {
    limiter = new RedisLimiter({ client: connect(), keyPrefix: `co_${name}_` });
    // REDIS_PIPELINE_LIMIT: at most 10 keys per merged call.
    limited = new RedisLimiter({ client: connect(), keyPrefix: `co_lim_${name}_`, coalescing: { maxKeys: 10 } });
    // REDIS_PIPELINE_WINDOW: calls collected for 40 ms.
    windowed = new RedisLimiter({ client: connect(), keyPrefix: `co_win_${name}_`, coalescing: { windowMs: 40 } });
    await within(5000, () => [limiter, limited, windowed].every((l) => l.isHealthy()), 'every limiter connected');
  });
  afterAll(async () => {
    await Promise.all([limiter?.close(), limited?.close(), windowed?.close()]);
  });

  test('200 concurrent requests for one counter: one or a few script calls, counts 1..200 each once', async () => {
    const options = { deadline: Date.now() + 5000, stopIncrementWhenOverLimit: false };
    const calls0 = await scriptCalls(nodes());
    const results = await Promise.all(Array.from({ length: 200 }, () => limiter.check([check('hot')], options)));
    const calls = (await scriptCalls(nodes())) - calls0;
    expect(results.map((r) => r[0]!.used).sort((a, b) => a - b)).toEqual(Array.from({ length: 200 }, (_, i) => i + 1));
    expect(results.filter((r) => r[0]!.allowed)).toHaveLength(50);
    // Merged: far fewer script calls than requests (a NOSCRIPT retry may add one).
    expect(calls).toBeLessThanOrEqual(4);
  });

  test("200 concurrent looks (STOP mode: requests held back, or looked at before they are charged) merge too: few script calls, each answer its own look's", async () => {
    const options = { deadline: Date.now() + 5000, stopIncrementWhenOverLimit: false };
    const listSpec = { algorithm: 'fixed_window' as const, limit: 5, windowSeconds: 86_400, burst: 5 };
    const list = (value: string, hits: number): LimitCheck[] => [
      { ...check(value, hits), listSize: 2 },
      { ...check(value, hits), spec: listSpec },
    ];
    // Some state to look at: counter `look-i` holds i (0..9) hits, each list i hits of its day.
    for (let i = 1; i < 10; i++) {
      await limiter.check([check(`look-${i}`, i)], options);
      await limiter.check(list(`lookl-${i}`, i), { ...options });
    }
    const requests = Array.from({ length: 200 }, (_, r) => (r % 2 === 0 ? [check(`look-${r % 10}`, 3)] : list(`lookl-${r % 10}`, 2)));
    const held = { ...options, holdBack: true };
    const alone = [];
    for (const req of requests.slice(0, 20)) alone.push(await limiter.check(req, held));
    const calls0 = await scriptCalls(nodes());
    const looked = await Promise.all(requests.map((req) => limiter.check(req, held)));
    const calls = (await scriptCalls(nodes())) - calls0;
    // The same answers as one look at a time (the first 20: every request shape; the times
    // run on the real clock), nothing charged.
    const judged = (answers: typeof looked) => answers.map((rs) => rs.map((r) => [r.allowed, r.used, r.remaining]));
    expect(judged(looked.slice(0, 20))).toEqual(judged(alone));
    expect(looked[2]![0]).toMatchObject({ used: 2, allowed: true });
    expect(looked[3]).toMatchObject([{ used: 3 }, { used: 3, allowed: true }]);
    expect((await limiter.check([check('look-9', 0)], options))[0]!.used).toBe(9);
    // Merged: per script (fixed_window, fixed_window_list) and slot, not one call a request.
    console.info(`looks (${name}): 200 requests, ${calls} script calls`);
    expect(calls).toBeLessThanOrEqual(name === 'standalone' ? 4 : 25);
  });

  test('200 concurrent requests with a rate_limits list each: one or a few script calls, exactly the tighter limit admitted', async () => {
    // The hour's fixed window must not roll over during the burst.
    await awayFromWindowEdge(3600, 10_000);
    const counter = { domain: 'co', entries: [{ key: 'list', value: 'hot' }] };
    const request: LimitCheck[] = [
      { counter, spec: { algorithm: 'fixed_window', limit: 1000, windowSeconds: 3600, burst: 1000 }, hits: 1, listSize: 2 },
      { counter, spec: { algorithm: 'token_bucket', limit: 120, windowSeconds: 86_400, burst: 120 }, hits: 1 },
    ];
    const options = { deadline: Date.now() + 5000, stopIncrementWhenOverLimit: false };
    const calls0 = await scriptCalls(nodes());
    const results = await Promise.all(Array.from({ length: 200 }, () => limiter.check(request, options)));
    const calls = (await scriptCalls(nodes())) - calls0;
    const admitted = results.filter((r) => r[0]!.allowed && r[1]!.allowed);
    expect(admitted).toHaveLength(120);
    // All or nothing: the hour counted only the admitted lists, each once.
    expect(admitted.map((r) => r[0]!.used).sort((a, b) => a - b)).toEqual(Array.from({ length: 120 }, (_, i) => i + 1));
    // Merged: far fewer script calls than requests (a NOSCRIPT retry may add one).
    expect(calls).toBeLessThanOrEqual(4);
  });

  test('STOP mode: 200 concurrent requests with a list of fixed windows merge (a list never charges a denied hit, so its stop pass is a count)', async () => {
    await awayFromWindowEdge(86_400, 10_000);
    const counter = { domain: 'co', entries: [{ key: 'stoplist', value: name }] };
    const request: LimitCheck[] = [
      { counter, spec: { algorithm: 'fixed_window', limit: 1000, windowSeconds: 3600, burst: 1000 }, hits: 1, listSize: 2 },
      { counter, spec: { algorithm: 'fixed_window', limit: 70, windowSeconds: 86_400, burst: 70 }, hits: 1 },
    ];
    const options = { deadline: Date.now() + 5000, stopIncrementWhenOverLimit: true };
    const calls0 = await scriptCalls(nodes());
    const results = await Promise.all(Array.from({ length: 200 }, () => limiter.check(request, options)));
    const calls = (await scriptCalls(nodes())) - calls0;
    const admitted = results.filter((r) => r[0]!.allowed && r[1]!.allowed);
    expect(admitted).toHaveLength(70);
    expect(admitted.map((r) => r[1]!.used).sort((a, b) => a - b)).toEqual(Array.from({ length: 70 }, (_, i) => i + 1));
    // Merged: far fewer script calls than requests (a NOSCRIPT retry may add one).
    expect(calls).toBeLessThanOrEqual(4);
  });

  test("STOP mode: 200 concurrent requests of two fixed windows merge their stop passes, each request's counters held back on their own", async () => {
    await awayFromWindowEdge(3600, 10_000);
    // `tight` admits 50; once it would go over, STOP charges only it (it counts every hit, as the
    // reference increments the key that goes over) and holds back `wide`.
    const tight = check(`stop-tight-${name}`);
    // In one slot with `tight` (in a cluster too), so that a request is one stop unit: counters
    // of two slots are looked at and charged in two calls, not atomically.
    const slotOf = (c: LimitCheck) => keySlot(checkKey(`co_${name}_`, c));
    let wideValue = '';
    for (let i = 0; wideValue === '' && i < 200_000; i++) if (slotOf(check(`stop-wide-${i}`)) === slotOf(tight)) wideValue = `stop-wide-${i}`;
    const wide = { ...check(wideValue), spec: { ...spec, limit: 1000 } };
    const options = { deadline: Date.now() + 5000, stopIncrementWhenOverLimit: true };
    const calls0 = await scriptCalls(nodes());
    const results = await Promise.all(Array.from({ length: 200 }, () => limiter.check([tight, wide], options)));
    const calls = (await scriptCalls(nodes())) - calls0;
    expect(results.filter((r) => r[0]!.allowed && r[1]!.allowed)).toHaveLength(50);
    const peek = async (c: LimitCheck) => (await limiter.check([{ ...c, hits: 0 }], { ...options, stopIncrementWhenOverLimit: false }))[0]!.used;
    expect(await peek(tight)).toBe(200);
    expect(await peek(wide)).toBe(50);
    // Merged: one stop unit a request, the units of concurrent requests in one call.
    console.info(`stop (${name}): 200 requests, ${calls} script calls`);
    expect(calls).toBeLessThanOrEqual(4);
  });

  test('STOP mode: 200 concurrent looks at 200 counters spread over the slots merge per node (a cluster names them), each its own answer', async () => {
    const options = { deadline: Date.now() + 5000, stopIncrementWhenOverLimit: true };
    const values = Array.from({ length: 200 }, (_, i) => `lookspread${i}`);
    await Promise.all(values.map((v, i) => limiter.check([check(v, i % 7)], { ...options, stopIncrementWhenOverLimit: false })));
    const calls0 = await scriptCalls(nodes());
    const looked = await Promise.all(values.map((v) => limiter.check([check(v, 1)], { ...options, holdBack: true })));
    const calls = (await scriptCalls(nodes())) - calls0;
    expect(looked.map((r) => r[0]!.used)).toEqual(values.map((_, i) => i % 7));
    // One call per node (a NOSCRIPT retry may add one per node).
    expect(calls).toBeLessThanOrEqual(2 * nodes().length);
  });

  test('200 concurrent requests for 200 counters, spread over the slots: a few script calls per node, counts exact (issue 20)', async () => {
    const options = { deadline: Date.now() + 5000, stopIncrementWhenOverLimit: false };
    const values = Array.from({ length: 200 }, (_, i) => `spread${i}`);
    await Promise.all(values.map((v) => limiter.check([check(v, 2)], options)));
    const calls0 = await scriptCalls(nodes());
    const results = await Promise.all(values.map((v) => limiter.check([check(v, 3)], options)));
    const calls = (await scriptCalls(nodes())) - calls0;
    expect(results.map((r) => r[0]!.used)).toEqual(values.map(() => 5));
    // One call per node (a cluster's counters merged across the node's slots), as on a single
    // Redis; a NOSCRIPT retry may add one per node.
    expect(calls).toBeLessThanOrEqual(2 * nodes().length);
  });

  test('REDIS_PIPELINE_LIMIT caps the keys of one merged call', async () => {
    const options = { deadline: Date.now() + 5000, stopIncrementWhenOverLimit: false };
    const calls0 = await scriptCalls(nodes());
    const results = await Promise.all(Array.from({ length: 100 }, () => limited.check([check('capped')], options)));
    const calls = (await scriptCalls(nodes())) - calls0;
    expect(results.map((r) => r[0]!.used).sort((a, b) => a - b)).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
    expect(calls).toBeGreaterThanOrEqual(10);
    expect(calls).toBeLessThanOrEqual(12);
  });

  test('REDIS_PIPELINE_WINDOW collects calls made over several event-loop turns', async () => {
    const options = { deadline: Date.now() + 5000, stopIncrementWhenOverLimit: false };
    const calls0 = await scriptCalls(nodes());
    const pending = [];
    for (let burst = 0; burst < 3; burst++) {
      for (let i = 0; i < 10; i++) pending.push(windowed.check([check('slow')], options));
      await new Promise((r) => setTimeout(r, 5));
    }
    const results = await Promise.all(pending);
    const calls = (await scriptCalls(nodes())) - calls0;
    expect(results.map((r) => r[0]!.used).sort((a, b) => a - b)).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));
    // Three bursts 5 ms apart fall into one 40 ms window (a NOSCRIPT retry may add one).
    expect(calls).toBeLessThanOrEqual(2);
  });

  test('700 concurrent requests x 64 descriptors: all answered, merged calls split at the default cap, breaker closed', async () => {
    const breakers: CountingBreaker[] = [];
    const wide = new RedisLimiter({
      client: connect(),
      keyPrefix: `co_wide_${name}_`,
      newBreaker: () => {
        const b = new CountingBreaker();
        breakers.push(b);
        return b;
      },
    });
    try {
      for (let i = 0; i < 250 && !wide.isHealthy(); i++) await new Promise((r) => setTimeout(r, 20));
      const many = { algorithm: 'fixed_window' as const, limit: 1000, windowSeconds: 3600, burst: 1000 };
      const request = Array.from({ length: 64 }, (_, d): LimitCheck => ({
        counter: { domain: 'co', entries: [{ key: 'd', value: `d${d}` }] },
        spec: many,
        hits: 1,
      }));
      const options = { deadline: Date.now() + 20_000, stopIncrementWhenOverLimit: false };
      const calls0 = await scriptCalls(nodes());
      const started = performance.now();
      const outcomes = await Promise.allSettled(Array.from({ length: 700 }, () => wide.check(request, options)));
      const ms = performance.now() - started;
      const calls = (await scriptCalls(nodes())) - calls0;
      const failed = outcomes.filter((o) => o.status === 'rejected');
      expect(failed.length, failed.length > 0 ? String((failed[0] as PromiseRejectedResult).reason) : '').toBe(0);
      const results = outcomes.map((o) => (o as PromiseFulfilledResult<Awaited<ReturnType<RedisLimiter['check']>>>).value);
      for (let d = 0; d < 64; d++) {
        expect(results.map((r) => r[d]!.used).sort((a, b) => a - b)).toEqual(Array.from({ length: 700 }, (_, i) => i + 1));
      }
      expect(breakers.reduce((n, b) => n + b.failures, 0)).toBe(0);
      expect(wide.isHealthy()).toBe(true);
      // 44,800 keys: at most DEFAULT_MAX_KEYS_PER_CALL per merged call.
      expect(calls).toBeGreaterThanOrEqual(Math.ceil((700 * 64) / DEFAULT_MAX_KEYS_PER_CALL));
      console.info(`coalescing (${name}): 700 requests x 64 descriptors answered in ${ms.toFixed(0)} ms with ${calls} script calls`);
    } finally {
      await wide.close();
    }
  });

  test('requests of several counters and hits are answered as separate calls would be', async () => {
    const options = { deadline: Date.now() + 5000, stopIncrementWhenOverLimit: false };
    const results = await Promise.all(Array.from({ length: 60 }, (_, i) => limiter.check([check(`v${i % 3}`, 2), check('w')], options)));
    for (let v = 0; v < 3; v++) {
      const used = results
        .filter((_, i) => i % 3 === v)
        .map((r) => r[0]!.used)
        .sort((a, b) => a - b);
      expect(used).toEqual(Array.from({ length: 20 }, (_, i) => 2 * (i + 1)));
    }
    expect(results.map((r) => r[1]!.used).sort((a, b) => a - b)).toEqual(Array.from({ length: 60 }, (_, i) => i + 1));
    // Over the limit exactly when the count passed 50.
    for (const r of results) for (const x of r) expect(x.allowed).toBe(x.used <= 50);
  });
});
