// `floodgate keys`: the real bin against a real redis-server. Keys without a TTL and keys of an
// unknown shape are reported, --fix gives the first a TTL, keys outside the prefix are left alone.
import { afterAll, beforeAll, expect, test } from 'vitest';
import { startStandalone, type RedisProcess } from '../harness/redis-servers';
import { startSentinel } from '../harness/redis-sentinel';
import { runCli } from '../helpers/run-cli';
import { uniquePrefix } from './redis-backend-helpers';

let redis: RedisProcess;
beforeAll(async () => {
  redis = await startStandalone();
});
afterAll(async () => {
  await redis?.stop();
});

test('reports keys without a TTL and of unknown shape; --fix gives the first a TTL', async () => {
  const p = uniquePrefix('keys');
  const healthy = `${p}rl:{shop:user=ann}:fixed_window:60`;
  const orphan = `${p}rl:{shop:user=bob}:fixed_window:60`;
  const orphanHash = `${p}rl:{shop:tenant=t}:token_bucket:3600`;
  const wrongType = `${p}rl:{shop:user=cy}:fixed_window:60`;
  const garbage = `${p}rl:garbage`;
  await redis.command('SET', healthy, '3', 'EX', '60');
  await redis.command('SET', orphan, '7');
  await redis.command('HSET', orphanHash, 'u', '1', 't', '2');
  await redis.command('HSET', wrongType, 'x', '1');
  await redis.command('SET', garbage, 'x', 'EX', '1000');
  await redis.command('SET', `${p}other`, 'not ours'); // outside <prefix>rl:, never touched

  const args = ['keys', '--redis', redis.url, '--prefix', p, '--pause', '1'];
  const report = await runCli(args);
  expect(report).toEqual({
    code: 1,
    stdout: [
      `unknown-shape ${garbage} (string)`,
      `no-ttl ${orphanHash} (hash)`,
      `no-ttl ${orphan} (string)`,
      `no-ttl,unknown-shape ${wrongType} (hash)`,
      'scanned 5 keys on 1 node: 3 without TTL, 2 of unknown shape',
      '',
    ].join('\n'),
    stderr: '',
  });
  expect(await redis.command('PTTL', orphan)).toBe(-1);

  // --fix changes floodgate's keys only; a key of unknown shape needs --fix-unknown (below).
  const fixed = await runCli([...args, '--fix', '--ttl', '500']);
  expect(fixed.stdout).toBe(
    [
      `unknown-shape ${garbage} (string)`,
      `no-ttl ${orphanHash} (hash) -> ttl 7200s`,
      `no-ttl ${orphan} (string) -> ttl 120s`,
      `no-ttl,unknown-shape ${wrongType} (hash)`,
      'scanned 5 keys on 1 node: 3 without TTL, 2 of unknown shape, 2 fixed',
      '',
    ].join('\n'),
  );
  expect(fixed.code).toBe(1); // unknown shapes are still there to look at
  const ttl = async (key: string) => Number(await redis.command('TTL', key));
  expect(await ttl(orphan)).toBeGreaterThan(110);
  expect(await ttl(orphan)).toBeLessThanOrEqual(120);
  expect(await ttl(orphanHash)).toBeGreaterThan(7100);
  expect(await ttl(wrongType)).toBe(-1);
  const unknownFixed = await runCli([...args, '--fix', '--fix-unknown', '--ttl', '500']);
  expect(unknownFixed.stdout).toContain(`no-ttl,unknown-shape ${wrongType} (hash) -> ttl 500s\n`);
  expect(await ttl(wrongType)).toBeGreaterThan(490);
  expect(await ttl(healthy)).toBeLessThanOrEqual(60);
  expect(await ttl(`${p}other`)).toBe(-1);

  const after = await runCli(args);
  expect(after.stdout).toBe(
    `unknown-shape ${garbage} (string)\nunknown-shape ${wrongType} (hash)\nscanned 5 keys on 1 node: 0 without TTL, 2 of unknown shape\n`,
  );

  await redis.command('DEL', garbage, wrongType);
  expect(await runCli(args)).toEqual({ code: 0, stdout: 'scanned 3 keys on 1 node: 0 without TTL, 0 of unknown shape\n', stderr: '' });
});

// Issue 30: in the shared layout (REDIS_KEY_LAYOUT=reference) the counters are the reference's
// keys, `<prefix><domain>_<key>_<value>_<window start>`: the scan walks them too, reports one
// without a TTL, and --fix gives it one that outlives its window; other keys under the prefix
// that are no counter of either layout are not ours to judge.
test("REDIS_KEY_LAYOUT=reference (or --layout reference): the reference's keys are recognised, reported without a TTL, fixed", async () => {
  const p = uniquePrefix('refkeys');
  const hourStart = Math.floor(Date.now() / 3_600_000) * 3600;
  const healthy = `${p}shop_user_ann_${hourStart}`;
  const orphan = `${p}shop_user_bob_${hourStart}`;
  const ownOrphan = `${p}rl:{shop:user=cy}:fixed_window:60`;
  await redis.command('SET', healthy, '3', 'EX', '3600');
  await redis.command('SET', orphan, '7');
  await redis.command('SET', ownOrphan, '1');
  await redis.command('SET', `${p}session_alice`, 'theirs'); // no window start: another application's
  await redis.command('HSET', `${p}shop_user_dee_${hourStart}`, 'x', '1'); // not a count

  const args = ['keys', '--redis', redis.url, '--prefix', p, '--pause', '0'];
  // The own layout walks `<prefix>rl:*` only, as before.
  expect((await runCli(args)).stdout).toBe(`no-ttl ${ownOrphan} (string)\nscanned 1 key on 1 node: 1 without TTL, 0 of unknown shape\n`);
  const expected = [
    `no-ttl ${ownOrphan} (string)`,
    `no-ttl ${orphan} (string, reference key)`,
    'scanned 3 keys on 1 node: 2 without TTL, 0 of unknown shape',
    '',
  ].join('\n');
  expect(await runCli([...args, '--domain', 'shop'], { REDIS_KEY_LAYOUT: 'reference' })).toEqual({ code: 1, stdout: expected, stderr: '' });
  expect((await runCli([...args, '--layout', 'reference', '--domain', 'shop'])).stdout).toBe(expected);
  // Without its domain known, no key is the reference's (the rules cannot be loaded here).
  const blind = await runCli([...args, '--layout', 'reference']);
  expect(blind.stdout).toBe(`no-ttl ${ownOrphan} (string)\nscanned 1 key on 1 node: 1 without TTL, 0 of unknown shape\n`);
  expect(blind.stderr).toContain('--domain');
  // --fix alone leaves a reference key as it is; --fix-reference gives it a TTL.
  await runCli([...args, '--layout', 'reference', '--domain', 'shop', '--fix']);
  expect(Number(await redis.command('TTL', orphan))).toBe(-1);
  const fixed = await runCli([...args, '--layout', 'reference', '--domain', 'shop', '--fix', '--fix-reference']);
  expect(fixed.stdout).toMatch(new RegExp(`no-ttl ${orphan} \\(string, reference key\\) -> ttl \\d+s\\n`));
  const ttl = Number(await redis.command('TTL', orphan));
  // Until one hour after its hour ends (an hour's start may be a day's: up to two days then).
  expect(ttl).toBeGreaterThan(3600 - 5);
  expect(ttl).toBeLessThanOrEqual(2 * 86_400);
  expect(Number(await redis.command('TTL', `${p}session_alice`))).toBe(-1);
  expect(await runCli([...args, '--layout', 'sideways'])).toMatchObject({ code: 2, stderr: expect.stringContaining('--layout') as unknown });
});

test('SCAN is bounded: --max-calls stops a scan of many keys early', async () => {
  const p = uniquePrefix('bound');
  for (let i = 0; i < 300; i++) await redis.command('SET', `${p}rl:{d:k=${i}}:fixed_window:60`, '1');
  const full = await runCli(['keys', '--redis', redis.url, '--prefix', p, '--count', '1000', '--pause', '0']);
  expect(full.stdout.endsWith('scanned 300 keys on 1 node: 300 without TTL, 0 of unknown shape\n')).toBe(true);
  const bounded = await runCli(['keys', '--redis', redis.url, '--prefix', p, '--count', '5', '--max-calls', '2', '--pause', '0']);
  const scanned = Number(/scanned (\d+) keys/.exec(bounded.stdout)?.[1]);
  expect(scanned).toBeLessThan(300);
});

test('an unreachable Redis exits 2 with the reason', async () => {
  const run = await runCli(['keys', '--redis', '127.0.0.1:1']);
  expect(run.code).toBe(2);
  expect(run.stderr).toMatch(/^floodgate keys: redis 127\.0\.0\.1:1: .*ECONNREFUSED/);
});

test('--sentinel: the URL names the master and its sentinels, and the scan reaches the master they name', async () => {
  const sentinel = await startSentinel();
  try {
    const p = uniquePrefix('keys-sentinel');
    const orphan = `${p}rl:{shop:user=dee}:fixed_window:60`;
    await sentinel.master().command('SET', orphan, '2');
    const url = `${sentinel.masterName},${sentinel.sentinels}`;
    expect(await runCli(['keys', '--redis', url, '--sentinel', '--prefix', p, '--pause', '1'])).toEqual({
      code: 1,
      stdout: `no-ttl ${orphan} (string)\nscanned 1 key on 1 node: 1 without TTL, 0 of unknown shape\n`,
      stderr: '',
    });
    const fixed = await runCli(['keys', '--redis', url, '--sentinel', '--prefix', p, '--pause', '1', '--fix']);
    expect(fixed.code).toBe(0);
    expect(Number(await sentinel.master().command('TTL', orphan))).toBeGreaterThan(110);
    // REDIS_TYPE=SENTINEL and REDIS_URL as the service reads them, no option.
    await sentinel.master().command('PERSIST', orphan);
    expect(await runCli(['keys', '--prefix', p, '--pause', '1'], { REDIS_TYPE: 'SENTINEL', REDIS_URL: url })).toEqual({
      code: 1,
      stdout: `no-ttl ${orphan} (string)\nscanned 1 key on 1 node: 1 without TTL, 0 of unknown shape\n`,
      stderr: '',
    });
    const both = await runCli(['keys', '--redis', url, '--sentinel', '--cluster']);
    expect(both).toMatchObject({ code: 2 });
    expect(both.stderr).toContain('--sentinel and --cluster');
  } finally {
    await sentinel.stop();
  }
}, 60_000);

// Issue 18, finding 11: with the default CACHE_KEY_PREFIX (empty), `rl:*` is also other
// applications' namespace. --fix gave rl:session:alice and rl:quota:bob a one-day TTL.
test("--fix changes only keys whose whole shape is floodgate's; other keys under rl: need --fix-unknown", async () => {
  const own = await startStandalone();
  try {
    const ours = 'rl:{shop:user=ann}:fixed_window:60';
    // A fixed window's own key (issue 20): the counter's name and its window's start.
    const oursWindow = 'rl:{shop:user=ann}:fixed_window:60:1700000040';
    const others = [
      'rl:session:alice',
      'rl:quota:bob',
      'rl:{session:alice}:fixed_window:60',
      'rl:{a}:fixed_window:60:x',
      'rl:{shop:user=a=b}:gcra:60',
      'rl:{shop:user=ann}:gcra:60:1700000040',
    ];
    await own.command('SET', ours, '1');
    await own.command('SET', oursWindow, '1');
    for (const key of others) await own.command('SET', key, 'theirs');
    const fixed = await runCli(['keys', '--redis', own.url, '--fix', '--pause', '0']);
    const ttls = async () => Object.fromEntries(await Promise.all(others.map(async (k) => [k, Number(await own.command('TTL', k))] as const)));
    console.log(`--fix with an empty prefix: ${JSON.stringify(await ttls())}`);
    expect(fixed.stdout).toContain(`no-ttl ${ours} (string) -> ttl 120s\n`);
    expect(fixed.stdout).toContain(`no-ttl ${oursWindow} (string) -> ttl 120s\n`);
    expect(await ttls()).toEqual(Object.fromEntries(others.map((k) => [k, -1])));
    expect(fixed.stdout).toContain(`no-ttl,unknown-shape rl:session:alice (string)\n`);
    expect(fixed.stdout.endsWith('scanned 8 keys on 1 node: 8 without TTL, 6 of unknown shape, 2 fixed\n')).toBe(true);
    // Only when asked explicitly.
    expect(await runCli(['keys', '--redis', own.url, '--fix-unknown'])).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('--fix-unknown needs --fix') as unknown,
    });
    await runCli(['keys', '--redis', own.url, '--fix', '--fix-unknown', '--ttl', '600', '--pause', '0']);
    for (const ttl of Object.values(await ttls())) expect(ttl).toBeGreaterThan(590);
  } finally {
    await own.stop();
  }
});

test('a key name with a newline cannot forge a report line: control characters are escaped', async () => {
  const p = uniquePrefix('newline');
  // A value the limiter keeps as it is (only `%{}:=` are escaped in keys), of a known shape.
  const key = `${p}rl:{shop:user=a\nno-ttl forged (string)\\n}:fixed_window:60`;
  await redis.command('SET', key, '1');
  const run = await runCli(['keys', '--redis', redis.url, '--prefix', p, '--pause', '0']);
  expect(run.stdout).toBe(
    `no-ttl ${p}rl:{shop:user=a\\nno-ttl forged (string)\\\\n}:fixed_window:60 (string)\n` +
      'scanned 1 key on 1 node: 1 without TTL, 0 of unknown shape\n',
  );
});

test('the --redis password is never echoed: not in connection errors, not in usage errors', async () => {
  const secret = 's3cret-Pw';
  const guarded = await startStandalone({ password: 'right-password' });
  try {
    const runs = [
      await runCli(['keys', '--redis', `redis://:${secret}@127.0.0.1:1`]),
      await runCli(['keys', '--redis', `redis://:${secret}@${guarded.url}`]),
      await runCli(['keys', '--redis', `redis://:${secret}@${guarded.url}`, '--sentinel']),
      await runCli(['keys', '--redis', `redis://user:${secret}@host`, '--cluster']),
    ];
    for (const run of runs) {
      expect(run.code).toBe(2);
      expect(run.stderr).not.toContain(secret);
      expect(run.stderr).toMatch(/\*\*\*@/);
    }
    expect(runs[1]?.stderr).toMatch(/WRONGPASS|invalid username-password/);
  } finally {
    await guarded.stop();
  }
});

// Issue 19: `floodgate keys` read only --redis; the service's own REDIS_URL and REDIS_TYPE (and
// the credentials that go with them) now serve when no --redis, --sentinel or --cluster is given.
test('without --redis, the scan reaches the Redis of REDIS_URL (with its password), and says so when there is none', async () => {
  const guarded = await startStandalone({ password: 'pw-from-env' });
  try {
    const p = uniquePrefix('env');
    await guarded.command('SET', `${p}rl:{shop:user=eve}:fixed_window:60`, '1');
    const run = await runCli(['keys', '--prefix', p, '--pause', '0'], { REDIS_URL: `redis://:pw-from-env@${guarded.url}` });
    expect(run).toEqual({
      code: 1,
      stdout: `no-ttl ${p}rl:{shop:user=eve}:fixed_window:60 (string)\nscanned 1 key on 1 node: 1 without TTL, 0 of unknown shape\n`,
      stderr: '',
    });
    const prefixed = await runCli(['keys', '--pause', '0'], { REDIS_URL: `redis://:pw-from-env@${guarded.url}`, CACHE_KEY_PREFIX: p });
    expect(prefixed.stdout).toContain('scanned 1 key on 1 node');
    const none = await runCli(['keys']);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('--redis <url> or REDIS_URL');
  } finally {
    await guarded.stop();
  }
});
