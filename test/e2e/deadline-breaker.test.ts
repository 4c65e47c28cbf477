// Issue 18, finding 1: a caller's own deadline must not open the Redis circuit breaker that
// every caller shares. Real Redis, real gRPC: attackers call with 1–3 ms deadlines (each gives
// up long before a healthy Redis would fail) while an ordinary client with a 10 s deadline calls
// beside them (2 s at first: a busy machine's answer may take longer). Before the fix, each attacker call whose deadline ran out counted as a Redis
// failure, three in a row opened the breaker for 500 ms, and the ordinary client was refused
// with UNAVAILABLE most of the time.
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startStandalone, type RedisProcess } from '../harness/redis-servers';
import { within } from '../harness/wait';
import { oneDescriptor, rlsStub, type RlsStub } from '../helpers/rls-client';
import { startTestApp, type TestApp } from '../helpers/test-app';

const RULES = `
domain: d
descriptors:
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 100000000 }
`;

// The attack lasts at least this long and until both sides made enough calls (bounded): a fixed
// amount of work, however slow the machine.
const ATTACK_MS = 3000;
const ATTACK_MAX_MS = 60_000;
const ENOUGH_CALLS = 30;
const ATTACKERS = 12;

function call(stub: RlsStub, user: string, deadlineMs: number): Promise<string> {
  return new Promise((resolve) => {
    stub.ShouldRateLimit(oneDescriptor('d', { user }), { deadline: Date.now() + deadlineMs }, (err) =>
      resolve(err ? (grpc.status[err.code] ?? String(err.code)) : 'OK'),
    );
  });
}

describe('callers that give up early (issue 18, finding 1)', () => {
  let redis: RedisProcess;
  let t: TestApp;
  beforeAll(async () => {
    redis = await startStandalone();
    t = await startTestApp({ 'd.yaml': RULES }, { REDIS_URL: redis.url });
    await within(5000, () => t.app.limiter.isHealthy(), 'the backend connected');
  });
  afterAll(async () => {
    await t?.stop();
    await redis?.stop();
  });

  test('do not open the breaker: an ordinary client with a 10 s deadline is answered every time', async () => {
    const address = `127.0.0.1:${t.app.grpcPort}`;
    const attacker = rlsStub(address, grpc.credentials.createInsecure());
    const ordinary = rlsStub(address, grpc.credentials.createInsecure());
    expect(await call(ordinary, 'warm', 10_000)).toBe('OK');
    expect(await call(attacker, 'warm', 10_000)).toBe('OK');
    const attackerAnswers: Record<string, number> = {};
    const ordinaryAnswers: Record<string, number> = {};
    const started = Date.now();
    let ordinarySent = 0;
    const going = (): boolean =>
      Date.now() - started < ATTACK_MAX_MS &&
      (Date.now() - started < ATTACK_MS || (attackerAnswers.DEADLINE_EXCEEDED ?? 0) < ENOUGH_CALLS || ordinarySent < ENOUGH_CALLS);
    let sent = 0;
    const attack = async (): Promise<void> => {
      // Bounded in time and count.
      while (going() && sent < 200_000) {
        const answer = await call(attacker, `a${sent++}`, 1 + (sent % 3));
        attackerAnswers[answer] = (attackerAnswers[answer] ?? 0) + 1;
      }
    };
    const ordinaryClient = async (): Promise<void> => {
      while (going()) {
        ordinarySent++;
        // The point is never UNAVAILABLE (an open breaker); the deadline leaves a busy machine room.
        const answer = await call(ordinary, 'alice', 10_000);
        ordinaryAnswers[answer] = (ordinaryAnswers[answer] ?? 0) + 1;
        await new Promise((r) => setTimeout(r, 5));
      }
    };
    await Promise.all([...Array.from({ length: ATTACKERS }, attack), ordinaryClient()]);
    attacker.close();
    ordinary.close();
    const ordinaryCalls = Object.values(ordinaryAnswers).reduce((a, b) => a + b, 0);
    const ordinaryFailed = ordinaryCalls - (ordinaryAnswers.OK ?? 0);
    console.info(
      `deadline attack: attacker ${JSON.stringify(attackerAnswers)}; ordinary client failed ${ordinaryFailed} of ${ordinaryCalls} (${JSON.stringify(ordinaryAnswers)})`,
    );
    // The attack took place: attackers' calls ran out of time on the server.
    expect(attackerAnswers.DEADLINE_EXCEEDED ?? 0).toBeGreaterThanOrEqual(ENOUGH_CALLS);
    expect(ordinaryCalls).toBeGreaterThanOrEqual(ENOUGH_CALLS);
    expect(ordinaryAnswers).toEqual({ OK: ordinaryCalls });
    expect(t.app.limiter.isHealthy()).toBe(true);
  }, 120_000);
});
