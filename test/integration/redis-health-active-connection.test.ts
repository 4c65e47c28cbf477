// Issue 19 finding 2: health does not follow Redis unless REDIS_HEALTH_CHECK_ACTIVE_CONNECTION
// says so. The reference is the judge: with its default (false) it answered /healthcheck 200 to
// every probe while Redis was stopped for 12 s; Envoy Gateway's liveness probe watches
// /healthcheck, so a health that followed Redis restarted every pod during an outage. With the
// setting on, the reference flips gRPC service `ratelimit` and /healthcheck, while service ``
// stays SERVING (grpc-go's health server keeps it so).
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startStandalone, type RedisProcess } from '../harness/redis-servers';
import { sleep, within } from '../harness/wait';
import { oneDescriptor } from '../helpers/rls-client';
import { startTestApp, type TestApp } from '../helpers/test-app';
import { oneRule, timedCall, uniquePrefix } from './redis-backend-helpers';

const RULES = { 'h.yaml': oneRule('h', 'k', 5, 'hour') };

let redis: RedisProcess;
let plain: TestApp;
let active: TestApp;
let failing: TestApp;

beforeAll(async () => {
  redis = await startStandalone();
  plain = await startTestApp(RULES, { REDIS_URL: redis.url, BACKEND_FAILURE_MODE: 'allow', CACHE_KEY_PREFIX: uniquePrefix('plain') });
  active = await startTestApp(RULES, {
    REDIS_URL: redis.url,
    BACKEND_FAILURE_MODE: 'allow',
    CACHE_KEY_PREFIX: uniquePrefix('active'),
    REDIS_HEALTH_CHECK_ACTIVE_CONNECTION: 'true',
  });
  failing = await startTestApp(RULES, { REDIS_URL: redis.url, BACKEND_FAILURE_MODE: 'error', CACHE_KEY_PREFIX: uniquePrefix('failing') });
});
afterAll(async () => {
  await Promise.all([plain?.stop(), active?.stop(), failing?.stop()]);
  await redis?.stop();
});

interface Seen {
  http: number;
  ratelimit: string;
  overall: string;
  backendGauge: string | undefined;
}

async function look(t: TestApp): Promise<Seen> {
  const [http, ratelimit, overall, metrics] = await Promise.all([
    fetch(`${t.httpUrl}/healthcheck`).then((r) => r.status),
    t.client.healthCheck('ratelimit'),
    t.client.healthCheck(''),
    fetch(`${t.debugUrl}/metrics`).then((r) => r.text()),
  ]);
  return { http, ratelimit, overall, backendGauge: /^floodgate_backend_healthy (\d)$/m.exec(metrics)?.[1] };
}

describe('REDIS_HEALTH_CHECK_ACTIVE_CONNECTION', () => {
  test('off (the default): health stays 200/SERVING through a Redis outage; calls follow the failure mode; the gauge shows the outage', async () => {
    await within(15_000, () => plain.app.limiter.isHealthy() && active.app.limiter.isHealthy(), 'both connected');
    expect(await look(plain)).toEqual({ http: 200, ratelimit: 'SERVING', overall: 'SERVING', backendGauge: '1' });
    expect(await look(active)).toEqual({ http: 200, ratelimit: 'SERVING', overall: 'SERVING', backendGauge: '1' });

    await redis.kill('SIGKILL');
    const seenPlain: Seen[] = [];
    const answers: string[] = [];
    // Probes every 100 ms for 3 s, as a readiness probe with threshold 1 would, and calls.
    for (let i = 0; i < 30; i++) {
      seenPlain.push(await look(plain));
      // The failure mode answers at once; the deadline leaves a busy machine room to deliver it.
      answers.push((await timedCall(plain.client, oneDescriptor('h', { k: `down${i}` }), 5000)).code);
      await sleep(100);
    }
    // BACKEND_FAILURE_MODE=error: /json says what happened in its own words, not the Redis
    // client's ("Stream isn't writeable and enableOfflineQueue options is false").
    const json = await fetch(`${failing.httpUrl}/json`, {
      method: 'POST',
      body: JSON.stringify({ domain: 'h', descriptors: [{ entries: [{ key: 'k', value: 'json' }] }] }),
    });
    expect(json.status).toBe(503);
    expect(((await json.json()) as { error: string }).error).toMatch(/^backend unavailable: redis (is not connected|did not answer)/);
    const activeDown = await within(15_000, async () => (await look(active)).http === 500, 'active: /healthcheck 500');
    const activeSeen = await look(active);

    expect(seenPlain.map((s) => s.http).filter((s) => s !== 200)).toEqual([]);
    expect(seenPlain.map((s) => s.ratelimit).filter((s) => s !== 'SERVING')).toEqual([]);
    expect(answers.filter((a) => a !== 'OK')).toEqual([]);
    expect(seenPlain.at(-1)!.backendGauge).toBe('0');
    expect(activeSeen).toEqual({ http: 500, ratelimit: 'NOT_SERVING', overall: 'SERVING', backendGauge: '0' });

    await redis.restart();
    await within(30_000, async () => (await look(active)).http === 200, 'active: /healthcheck 200 again');
    await within(30_000, async () => (await look(plain)).backendGauge === '1', 'plain: gauge 1 again');
    expect(await look(active)).toEqual({ http: 200, ratelimit: 'SERVING', overall: 'SERVING', backendGauge: '1' });
    console.info(`redis down: plain health 200 on ${seenPlain.length}/${seenPlain.length} probes; active 500 after ${activeDown} ms`);
  });
});
