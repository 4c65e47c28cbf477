// Issue 30 (review of the leave branch): the carry-over's GET goes around the Redis limiter's circuit
// breaker. With Redis hanging and the node's circuit open, a request is refused at once
// (BackendUnavailableError, which BACKEND_FAILURE_MODE answers); a request for a window not yet
// carried waits for its whole deadline on the carry's GET instead, the failure mode's answer
// coming only after the client has given up. Judged by the error's type, not by time.
import Redis from 'ioredis';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { BackendUnavailableError } from '../../src/base/errors';
import type { LimitCheck } from '../../src/limiter/limiter';
import { CircuitBreaker } from '../../src/limiter/redis/circuit-breaker';
import { RedisLimiter } from '../../src/limiter/redis/redis-limiter';
import { ReferenceCarryOver } from '../../src/limiter/redis/reference-carry-over';
import { startStandalone, type RedisProcess } from '../harness/redis-servers';
import { uniquePrefix } from './redis-backend-helpers';

let redis: RedisProcess;
beforeAll(async () => {
  redis = await startStandalone();
});
afterAll(async () => {
  if (redis?.pid !== undefined && redis.isRunning()) process.kill(redis.pid, 'SIGCONT');
  await redis?.stop();
});

const check = (value: string): LimitCheck => ({
  counter: { domain: 'd', entries: [{ key: 'user', value }] },
  spec: { algorithm: 'fixed_window', limit: 10, windowSeconds: 3600, burst: 0, shareable: true },
  hits: 1,
});

test('with the circuit open, a first hit of a window is refused at once, as without the carry-over', async () => {
  const client = new Redis({ port: redis.port, lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false, commandTimeout: 200 });
  await client.connect();
  const prefix = uniquePrefix('br');
  // One failure opens the circuit for a minute: nothing here depends on speed.
  const limiter = new RedisLimiter({ client, keyPrefix: prefix, newBreaker: () => new CircuitBreaker(1, 60_000) });
  const carry = new ReferenceCarryOver(limiter, { client, keyPrefix: prefix, carryUntil: Date.now() + 3_600_000 });
  const options = () => ({ deadline: Date.now() + 2000, stopIncrementWhenOverLimit: false });
  try {
    await carry.check([check('warm')], options());
    process.kill(redis.pid!, 'SIGSTOP');
    // The circuit opens on a failed call of the limiter (its window carried already).
    await carry.check([check('warm')], options()).catch(() => undefined);
    const control = await limiter.check([check('fresh')], options()).catch((err: unknown) => err);
    expect(control).toBeInstanceOf(BackendUnavailableError);
    expect((control as Error).message).toContain('circuit open');
    const outcome = await carry.check([check('fresh2')], options()).catch((err: unknown) => err);
    // Today: a DeadlineExceededError/BackendUnavailableError from the carry's GET, after waiting on a hung Redis.
    expect((outcome as Error).message).toContain('circuit open');
  } finally {
    process.kill(redis.pid!, 'SIGCONT');
    await limiter.close().catch(() => undefined);
  }
});
