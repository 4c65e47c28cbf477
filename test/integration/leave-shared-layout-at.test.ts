// Issue 30: leaving the shared layout exactly. Every pod set to REDIS_KEY_LAYOUT=reference with
// REDIS_KEY_LAYOUT_UNTIL=T counts in the reference's keys until T (its clock) and in floodgate's own
// keys from T on, carrying over the count of each window in progress: all pods switch at the same
// moment, so no two of them ever count one window apart (a rolling update to the own layout
// would let old and new pods count apart while it runs). Two servers in this process, real gRPC,
// real Redis.
import Redis from 'ioredis';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { referenceWindowKey } from '../../src/limiter/reference-key';
import { startStandalone, type RedisProcess } from '../harness/redis-servers';
import { sleep } from '../harness/wait';
import { oneDescriptor } from '../helpers/rls-client';
import { startTestApp, type TestApp } from '../helpers/test-app';
import { awayFromWindowEdge } from '../helpers/windows';
import { scanKeys, uniquePrefix } from './redis-backend-helpers';

const RULES = {
  'd.yaml': `
domain: d
descriptors:
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 10 }
`,
};

describe('REDIS_KEY_LAYOUT_UNTIL: every pod leaves the shared layout at one moment (issue 30)', () => {
  let redis: RedisProcess;
  let admin: Redis;
  beforeAll(async () => {
    redis = await startStandalone();
    admin = new Redis({ port: redis.port, lazyConnect: true });
    await admin.connect();
  });
  afterAll(async () => {
    await admin?.quit();
    await redis?.stop();
  });

  test('4 counted in the reference key before T; from T on both pods count in the own key from 4: exactly 6 more admitted', async () => {
    // T must come after the pods are up and the 4 calls made. A loaded machine may take longer
    // than the first margin: then the attempt is started again with T three times further off
    // (fresh prefix: nothing of the attempt before counts), at most 4 times. Never passes
    // without the checks below having run.
    let marginMs = 10_000;
    for (let attempt = 0; attempt < 4; attempt++, marginMs *= 3) {
      if (await switchAfter(marginMs)) return;
    }
    throw new Error('the pods never started and made 4 calls before T, even with T 270 s off');
  }, 600_000);

  /** One attempt with T `marginMs` after it starts; false when T came before the 4 calls were made. */
  async function switchAfter(marginMs: number): Promise<boolean> {
    await awayFromWindowEdge(3600, marginMs + 60_000);
    const prefix = uniquePrefix('until');
    const at = Date.now() + marginMs;
    const env = {
      BACKEND_TYPE: 'redis',
      REDIS_URL: `127.0.0.1:${redis.port}`,
      CACHE_KEY_PREFIX: prefix,
      REDIS_KEY_LAYOUT: 'reference',
      REDIS_KEY_LAYOUT_UNTIL: new Date(at).toISOString(),
    };
    const pods: TestApp[] = [await startTestApp(RULES, env), await startTestApp(RULES, env)];
    try {
      const call = async (pod: TestApp) => (await pod.client.shouldRateLimit(oneDescriptor('d', { user: 'alice' }))).overall_code;
      const before: string[] = [];
      for (let i = 0; i < 4; i++) before.push(await call(pods[i % 2]!));
      // The calls before T must have been before T.
      if (Date.now() >= at) return false;
      expect(before).toEqual(['OK', 'OK', 'OK', 'OK']);
      const referenceKey = referenceWindowKey(prefix, { domain: 'd', entries: [{ key: 'user', value: 'alice' }] }, 3600, Date.now());
      expect(await admin.get(referenceKey)).toBe('4');
      await sleep(at - Date.now() + 100);
      const after: string[] = [];
      for (let i = 0; i < 10; i++) after.push(await call(pods[i % 2]!));
      expect(after).toEqual([...Array<string>(6).fill('OK'), ...Array<string>(4).fill('OVER_LIMIT')]);
      // The reference key kept the count of before T; floodgate's own key went on from it.
      expect(await admin.get(referenceKey)).toBe('4');
      const own = (await scanKeys(redis, prefix + 'rl:')).filter((k) => k.includes(':fixed_window:3600:'));
      expect(own).toHaveLength(1);
      expect(await admin.get(own[0]!)).toBe('14');
      return true;
    } finally {
      await Promise.all(pods.map((p) => p.stop()));
    }
  }
});
