// Issue 30 (review of the leave branch): `floodgate keys --fix` in the shared layout must never
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

test('with the domains known (--domain), only a key of such a domain with a recent, aligned, past window start is a reference counter; --fix changes it only with --fix-reference', async () => {
  const nowS = Math.floor(Date.now() / 1000);
  const hourStart = nowS - (nowS % 3600);
  const real = `shop_user_bob_${hourStart}`;
  const others = [
    `shopping_cart_x_${hourStart}`, // another application's key under a domain-like name
    `shop_user_eve_${hourStart + 7200}`, // a known domain, a window start in the future
    'shop_user_mallory_1000000000', // a known domain, a window start from 2001
    `shop_user_trent_${hourStart - 2 * 31_536_000}`, // aligned to an hour, two years old
    `orders_2024_11_${hourStart}`, // no domain of the rules
  ];
  for (const k of [real, ...others]) await redis.command('SET', k, '3');

  const plainFix = await keys(['--redis', redis.url, '--prefix', '', '--layout', 'reference', '--domain', 'shop', '--fix', '--pause', '0']);
  for (const k of [real, ...others]) expect({ k, ttl: Number(await redis.command('TTL', k)) }).toEqual({ k, ttl: -1 });
  expect(plainFix.out).toContain(`no-ttl ${real} (string, reference key)\n`);
  for (const k of others) expect(plainFix.out).not.toContain(k);

  const withReference = await keys([
    '--redis',
    redis.url,
    '--prefix',
    '',
    '--layout',
    'reference',
    '--domain',
    'shop',
    '--fix',
    '--fix-reference',
    '--pause',
    '0',
  ]);
  expect(Number(await redis.command('TTL', real))).toBeGreaterThan(0);
  for (const k of others) expect({ k, ttl: Number(await redis.command('TTL', k)) }).toEqual({ k, ttl: -1 });
  expect(withReference.out).toContain(`${real} (string, reference key) -> ttl`);
});

test('--domain and --fix-reference are refused where they mean nothing', async () => {
  await expect(keys(['--redis', redis.url, '--fix-reference', '--layout', 'reference', '--domain', 'shop'])).rejects.toThrow(
    /--fix-reference needs --fix/,
  );
});
