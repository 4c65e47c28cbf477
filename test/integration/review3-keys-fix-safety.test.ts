// Review of issue 30 (branch leave): `floodgate keys --fix` in the shared layout must never
// touch a key of another application. CACHE_KEY_PREFIX is empty by default (as the reference's),
// so another application's keys sit under the prefix; a string key that merely ends in
// `_<digits>` after two more underscores is taken for a reference counter and given a TTL
// computed from the "window start" (its trailing number): 1 second, i.e. the key is deleted.
import { afterAll, beforeAll, expect, test } from 'vitest';
import { startStandalone, type RedisProcess } from '../harness/redis-servers';
import { keysCommand } from '../../src/cli/keys-command';

let redis: RedisProcess;
beforeAll(async () => {
  redis = await startStandalone();
});
afterAll(async () => {
  await redis?.stop();
});

async function keys(args: string[]): Promise<{ code: number; out: string }> {
  let out = '';
  const code = await keysCommand(args, { out: (t) => (out += t), err: (t) => (out += t) });
  return { code, out };
}

test("keys --fix with REDIS_KEY_LAYOUT=reference and the default empty prefix leaves other applications' keys alone", async () => {
  // Another application's persistent keys (no TTL, by design), in the same database.
  const theirs = ['orders_2024_11_30', 'user_profile_views_12345', 'cart_items_user_1700000000'];
  for (const k of theirs) await redis.command('SET', k, '5');

  const { out } = await keys(['--redis', redis.url, '--prefix', '', '--layout', 'reference', '--fix', '--pause', '0']);
  // Today: each is reported as "(string, reference key) -> ttl 1s" and expires a second later.
  for (const k of theirs) expect({ k, ttl: Number(await redis.command('TTL', k)) }).toEqual({ k, ttl: -1 });
  expect(out).not.toContain('reference key) -> ttl');
});
