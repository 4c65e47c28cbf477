// Issue 30 (review of the leave branch): what the default-on carry-over costs a deployment that never
// ran the reference. Measured against the opt-out (REDIS_KEY_LAYOUT_CARRY_OVER=0) in the same run.
import Redis from 'ioredis';
import { afterAll, beforeAll, expect, test } from 'vitest';
import type { LimitCheck, LimitResult, Limiter } from '../../src/limiter/limiter';
import { ReferenceCarryOver } from '../../src/limiter/redis/reference-carry-over';
import { startStandalone, type RedisProcess } from '../harness/redis-servers';
import { oneDescriptor } from '../helpers/rls-client';
import { startTestApp } from '../helpers/test-app';
import { uniquePrefix } from './redis-backend-helpers';

const RULES = {
  'd.yaml': `
domain: d
descriptors:
  - key: ip
    rate_limit: { unit: second, requests_per_unit: 10 }
`,
};

let redis: RedisProcess;
beforeAll(async () => {
  redis = await startStandalone();
});
afterAll(async () => {
  await redis?.stop();
});

async function gets(): Promise<number> {
  const info = String(await redis.command('INFO', 'commandstats'));
  return Number(/cmdstat_get:calls=(\d+)/.exec(info)?.[1] ?? 0);
}

test('a per-second rule, 200 clients one call each, no reference ever: the carry-over adds no Redis command', async () => {
  const run = async (env: Record<string, string>): Promise<number> => {
    const app = await startTestApp(RULES, {
      BACKEND_TYPE: 'redis',
      REDIS_URL: `127.0.0.1:${redis.port}`,
      CACHE_KEY_PREFIX: uniquePrefix('c'),
      ...env,
    });
    try {
      const before = await gets();
      for (let i = 0; i < 200; i++) await app.client.shouldRateLimit(oneDescriptor('d', { ip: `10.0.0.${i}` }));
      return (await gets()) - before;
    } finally {
      await app.stop();
    }
  };
  const off = await run({ REDIS_KEY_LAYOUT_CARRY_OVER: '0' });
  const on = await run({});
  // lua/lib/fixed_window_step.lua deliberately reads nothing more for windows of a minute or less.
  expect({ off, on }).toEqual({ off: 0, on: 0 });
});

class Allow implements Limiter {
  check(checks: readonly LimitCheck[]): Promise<LimitResult[]> {
    return Promise.resolve(checks.map(() => ({ allowed: true, used: 1, remaining: 1, resetMs: 1, retryAfterMs: 0 })));
  }
  isHealthy(): boolean {
    return true;
  }
  async close(): Promise<void> {}
}

test('more live windows than the memory holds: one GET per window, not one per hit', async () => {
  const client = new Redis({ port: redis.port, lazyConnect: true, maxRetriesPerRequest: 0 });
  await client.connect();
  try {
    // A day's window in progress at start (pinned clock); 101 users, memory for 100 (20,000 by default).
    const now = Math.floor(Date.now() / 86_400_000) * 86_400_000 + 43_200_000;
    const carry = new ReferenceCarryOver(new Allow(), {
      client,
      keyPrefix: uniquePrefix('t'),
      carryUntil: now + 1,
      now: () => now,
      maxSettled: 100,
    });
    const check = (v: number): LimitCheck => ({
      counter: { domain: 'd', entries: [{ key: 'user', value: `u${v}` }] },
      spec: { algorithm: 'fixed_window', limit: 1000, windowSeconds: 86_400, burst: 0, shareable: true },
      hits: 1,
    });
    const before = await gets();
    for (let round = 0; round < 5; round++) {
      for (let v = 0; v < 101; v++) await carry.check([check(v)], { deadline: Date.now() + 60_000, stopIncrementWhenOverLimit: false });
    }
    expect((await gets()) - before).toBe(101);
  } finally {
    client.disconnect();
  }
});

test('REDIS_KEY_LAYOUT_UNTIL: only windows begun before T (+5 s) carry, not those of the 15 minutes after T', async () => {
  const rules = {
    'd.yaml': `
domain: d
descriptors:
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 10 }
`,
  };
  const run = async (untilMs?: number): Promise<number> => {
    const app = await startTestApp(rules, {
      BACKEND_TYPE: 'redis',
      REDIS_URL: `127.0.0.1:${redis.port}`,
      CACHE_KEY_PREFIX: uniquePrefix('u'),
      ...(untilMs !== undefined
        ? { REDIS_KEY_LAYOUT: 'reference', REDIS_KEY_LAYOUT_UNTIL: String(Math.floor(untilMs / 1000)) }
        : { REDIS_KEY_LAYOUT_CARRY_OVER: '0' }),
    });
    try {
      const before = await gets();
      await app.client.shouldRateLimit(oneDescriptor('d', { user: 'alice' }));
      return (await gets()) - before;
    } finally {
      await app.stop();
    }
  };
  // The GETs of a pod in its own layout without the carry-over: the baseline (fixed_window.lua
  // reads the older own layout's key once, a GET inside the script, for a window over a minute).
  const baseline = await run();
  // T three hours ago: the hour in progress began after it; no pod counted it in the reference's key.
  const late = await run(Date.now() - 3 * 3_600_000);
  // Control, T a second ago: the hour in progress began before T, its count is read once.
  const control = await run(Date.now() - 1000);
  expect({ late: late - baseline, control: control - baseline }).toEqual({ late: 0, control: 1 });
});
