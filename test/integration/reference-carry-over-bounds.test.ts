// Issue 30: the carry-over's own bounds, on a real Redis with a recording limiter behind it: a
// Redis that hangs costs a request its deadline, never more; concurrent first hits of one window
// share one GET; the windows remembered are bounded (exact entries, then digests), and forgetting
// one costs a GET, never a count.
import Redis from 'ioredis';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { DeadlineExceededError } from '../../src/base/errors';
import type { LimitCheck, LimitResult, Limiter } from '../../src/limiter/limiter';
import { ReferenceCarryOver } from '../../src/limiter/redis/reference-carry-over';
import { startStandalone, type RedisProcess } from '../harness/redis-servers';
import { uniquePrefix } from './redis-backend-helpers';

/** Answers every check as allowed and counts its calls: what is behind the carry-over does not matter here. */
class Recording implements Limiter {
  calls = 0;
  check(checks: readonly LimitCheck[]): Promise<LimitResult[]> {
    this.calls++;
    return Promise.resolve(checks.map(() => ({ allowed: true, used: 1, remaining: 1, resetMs: 1, retryAfterMs: 0 })));
  }
  isHealthy(): boolean {
    return true;
  }
  async close(): Promise<void> {}
}

const check = (value: string): LimitCheck => ({
  counter: { domain: 'd', entries: [{ key: 'user', value }] },
  spec: { algorithm: 'fixed_window', limit: 10, windowSeconds: 3600, burst: 0, shareable: true },
  hits: 1,
});

async function gets(redis: RedisProcess): Promise<number> {
  const info = String(await redis.command('INFO', 'commandstats'));
  return Number(/cmdstat_get:calls=(\d+)/.exec(info)?.[1] ?? 0);
}

describe('the carry-over from the reference keys: its bounds (issue 30)', () => {
  let redis: RedisProcess;
  let client: Redis;
  beforeAll(async () => {
    redis = await startStandalone();
    client = new Redis({ port: redis.port, lazyConnect: true, maxRetriesPerRequest: 0 });
    await client.connect();
  });
  afterAll(async () => {
    client?.disconnect();
    if (redis?.pid !== undefined && redis.isRunning()) process.kill(redis.pid, 'SIGCONT');
    await redis?.stop();
  });

  test('20 concurrent first hits of one window: one GET; room for 2 windows exactly and 20 as digests: the 23rd window makes the first cost a GET again', async () => {
    // A pinned clock in the middle of the current hour: nothing depends on how fast this runs.
    const now = Math.floor(Date.now() / 3_600_000) * 3_600_000 + 1_800_000;
    const inner = new Recording();
    const carry = new ReferenceCarryOver(inner, { client, keyPrefix: uniquePrefix('b'), carryUntil: now + 1, now: () => now, maxSettled: 2 });
    const options = { deadline: Date.now() + 60_000, stopIncrementWhenOverLimit: false };
    let before = await gets(redis);
    await Promise.all(Array.from({ length: 20 }, () => carry.check([check('a')], options)));
    expect((await gets(redis)) - before).toBe(1);
    expect(inner.calls).toBe(20);
    before = await gets(redis);
    await carry.check([check('b')], options);
    await carry.check([check('a'), check('b')], options);
    expect((await gets(redis)) - before).toBe(1);
    // A third window does not fit exactly: the oldest ('a') is kept as a digest, read no more.
    await carry.check([check('c')], options);
    before = await gets(redis);
    await carry.check([check('a')], options);
    expect((await gets(redis)) - before).toBe(0);
    // 2 exact + 20 digests hold 22 windows; 20 more push the oldest digest ('a') out: one GET again.
    for (let i = 0; i < 20; i++) await carry.check([check(`x${i}`)], options);
    before = await gets(redis);
    await carry.check([check('c')], options);
    expect((await gets(redis)) - before).toBe(0);
    await carry.check([check('a')], options);
    await carry.check([check('a')], options);
    expect((await gets(redis)) - before).toBe(1);
  });

  test('a Redis that hangs: the request fails with DeadlineExceededError at its deadline, nothing sent on', async () => {
    const now = Date.now();
    const inner = new Recording();
    const carry = new ReferenceCarryOver(inner, { client, keyPrefix: uniquePrefix('h'), carryUntil: now + 60_000 });
    process.kill(redis.pid!, 'SIGSTOP');
    try {
      const outcome = await carry
        .check([check('z')], { deadline: Date.now() + 300, stopIncrementWhenOverLimit: false })
        .catch((err: unknown) => err);
      expect(outcome).toBeInstanceOf(DeadlineExceededError);
      expect(inner.calls).toBe(0);
    } finally {
      process.kill(redis.pid!, 'SIGCONT');
    }
  });
});
