// Issue 18, finding 2: sliding_log let one caller fill Redis. A request of 64 descriptors with
// hits_addend 1,000 wrote 64,000 sorted-set entries (one per hit); 96 such requests took Redis'
// used_memory to 778 MB. A call must cost O(1) entries whatever its hits: one entry per call,
// carrying its count. Real Redis and real gRPC for the Redis backend; the memory backend's
// counters are measured on the heap.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { LimitCheck } from '../../src/limiter/limiter';
import { MemoryLimiter } from '../../src/limiter/memory/memory-limiter';
import { startStandalone, type RedisProcess } from '../harness/redis-servers';
import { within } from '../harness/wait';
import type { TestRequest } from '../helpers/rls-client';
import { startTestApp, type TestApp } from '../helpers/test-app';

const RULES = `
domain: log
descriptors:
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 1000, algorithm: sliding_log }
`;

const REQUESTS = 48;
const DESCRIPTORS = 64;
const HITS = 1000;

function attackRequest(i: number, hits = HITS, tag = 'u'): TestRequest {
  return {
    domain: 'log',
    hits_addend: hits,
    descriptors: Array.from({ length: DESCRIPTORS }, (_, j) => ({ entries: [{ key: 'user', value: `${tag}-${i}-${j}` }] })),
  };
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? NaN;
}

function usedMemory(info: string): number {
  return Number(/^used_memory:(\d+)/m.exec(info)?.[1] ?? NaN);
}

describe('sliding_log stores one entry per call, not one per hit (issue 18, finding 2)', () => {
  let redis: RedisProcess;
  let t: TestApp;
  beforeAll(async () => {
    redis = await startStandalone();
    t = await startTestApp({ 'log.yaml': RULES }, { REDIS_URL: redis.url });
    await within(5000, () => t.app.limiter.isHealthy(), 'the backend connected');
  });
  afterAll(async () => {
    await t?.stop();
    await redis?.stop();
  });

  test(`Redis: ${REQUESTS} requests of ${DESCRIPTORS} descriptors × hits_addend ${HITS}`, async () => {
    await redis.command('CONFIG', 'SET', 'slowlog-log-slower-than', '0');
    await redis.command('CONFIG', 'SET', 'slowlog-max-len', '10000');
    await redis.command('SLOWLOG', 'RESET');
    const before = usedMemory(String(await redis.command('INFO', 'memory')));
    // Each attack call beside a control call of hits_addend 1 on as many fresh keys, interleaved:
    // the scripts' time per request (SLOWLOG, read and reset after each) is compared with the
    // control's, measured in the same run, so a busy machine slows both.
    const scriptUsOf = async (request: TestRequest): Promise<number> => {
      await redis.command('SLOWLOG', 'RESET');
      expect((await t.client.shouldRateLimit(request, 30_000)).overall_code).toBe('OK');
      const slowlog = (await redis.command('SLOWLOG', 'GET', '10000')) as [number, number, number, string[]][];
      return slowlog.filter((e) => /^eval/i.test(String(e[3][0]))).reduce((sum, e) => sum + Number(e[2]), 0);
    };
    const attackUs: number[] = [];
    const controlUs: number[] = [];
    for (let i = 0; i < REQUESTS; i++) {
      attackUs.push(await scriptUsOf(attackRequest(i)));
      controlUs.push(await scriptUsOf(attackRequest(i, 1, 'c')));
    }
    const after = usedMemory(String(await redis.command('INFO', 'memory')));
    const keys = ((await redis.command('KEYS', '*sliding_log*')) as string[]).filter((k) => k.includes('user=u-'));
    // A sample of the keys, one at a time (thousands of ZCARDs at once outran the test client).
    const sample: number[] = [];
    for (const k of keys.slice(0, 16)) sample.push(Number(await redis.command('ZCARD', k)));
    console.info(
      `sliding_log attack: ${REQUESTS} requests, ${keys.length} keys, sorted-set entries of 16 of them: ${sample.join(',')}; ` +
        `Redis used_memory ${(before / 1e6).toFixed(1)} MB -> ${(after / 1e6).toFixed(1)} MB; ` +
        `median script ${(median(attackUs) / 1000).toFixed(2)} ms, with hits_addend 1 ${(median(controlUs) / 1000).toFixed(2)} ms`,
    );
    expect(keys).toHaveLength(REQUESTS * DESCRIPTORS);
    // One entry per call: each key was hit by one call.
    expect(sample).toEqual(Array.from({ length: 16 }, () => 1));
    expect(after - before).toBeLessThan(20 * 1024 * 1024);
    // One entry per hit cost tens of times the control; one per call costs about the same.
    expect(median(attackUs)).toBeLessThan(5 * median(controlUs) + 1000);
    // The counts are still exact: the next hit on a key is over (1000 used of 1000).
    const again = await t.client.shouldRateLimit({ domain: 'log', descriptors: [{ entries: [{ key: 'user', value: 'u-0-0' }] }] });
    expect(again.overall_code).toBe('OVER_LIMIT');
    expect(again.statuses[0]?.limit_remaining).toBe(0);
  }, 120_000);

  test('memory backend: a counter of hits_addend 1000 holds one entry, not 1000', () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const limiter = new MemoryLimiter({ maxCounters: 1_000_000, now: () => 1_700_000_000_000 });
    const spec = { algorithm: 'sliding_log' as const, limit: 1000, windowSeconds: 3600, burst: 1000 };
    const checks = (i: number): LimitCheck[] =>
      Array.from({ length: DESCRIPTORS }, (_, j) => ({
        counter: { domain: 'log', entries: [{ key: 'user', value: `u-${i}-${j}` }] },
        spec,
        hits: HITS,
      }));
    gc();
    const before = process.memoryUsage().heapUsed;
    const requests = 200;
    for (let i = 0; i < requests; i++) expect(limiter.checkNow(checks(i), false).every((r) => r.allowed)).toBe(true);
    gc();
    const perCounter = (process.memoryUsage().heapUsed - before) / (requests * DESCRIPTORS);
    console.info(
      `sliding_log memory backend: ${requests * DESCRIPTORS} counters of ${HITS} hits: ${perCounter.toFixed(0)} B of heap per counter`,
    );
    expect(limiter.size).toBe(requests * DESCRIPTORS);
    expect(limiter.checkNow(checks(0).slice(0, 1), false)[0]).toMatchObject({ allowed: false, used: 1000, remaining: 0 });
    expect(perCounter).toBeLessThan(1000);
    void limiter.close();
  });
});
