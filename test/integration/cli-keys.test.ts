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

  const fixed = await runCli([...args, '--fix', '--ttl', '500']);
  expect(fixed.stdout).toBe(
    [
      `unknown-shape ${garbage} (string)`,
      `no-ttl ${orphanHash} (hash) -> ttl 7200s`,
      `no-ttl ${orphan} (string) -> ttl 120s`,
      `no-ttl,unknown-shape ${wrongType} (hash) -> ttl 500s`,
      'scanned 5 keys on 1 node: 3 without TTL, 2 of unknown shape, 3 fixed',
      '',
    ].join('\n'),
  );
  expect(fixed.code).toBe(1); // unknown shapes are still there to look at
  const ttl = async (key: string) => Number(await redis.command('TTL', key));
  expect(await ttl(orphan)).toBeGreaterThan(110);
  expect(await ttl(orphan)).toBeLessThanOrEqual(120);
  expect(await ttl(orphanHash)).toBeGreaterThan(7100);
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
    const both = await runCli(['keys', '--redis', url, '--sentinel', '--cluster']);
    expect(both).toMatchObject({ code: 2 });
    expect(both.stderr).toContain('--sentinel and --cluster');
  } finally {
    await sentinel.stop();
  }
}, 60_000);
