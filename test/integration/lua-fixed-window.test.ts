import { randomUUID } from 'node:crypto';
import Redis from 'ioredis';
import { startCluster } from '../harness/redis-servers';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { algorithmScripts, type CallPass } from '../../src/limiter/redis/algorithm-scripts';
import { readLuaScript } from '../../src/limiter/redis/lua-script';
import type { LimitCheck } from '../../src/limiter/limiter';
import { fixedWindowKey, windowKeysAmong } from '../helpers/fixed-window-value';
import { clusterTarget, standaloneTarget, type ScriptClient as Client, type ScriptTarget } from '../helpers/script-targets';

const SOURCE = readLuaScript('fixed_window');

const MODE_COUNT_ALL: CallPass = 'count';
const MODE_STOP: CallPass = 'stop';
const MODE_LOOK: CallPass = 'look';
const MODES: readonly CallPass[] = [MODE_COUNT_ALL, MODE_STOP, MODE_LOOK];
// The script's protocol is the limiter's to speak (arguments in, judgement from the reply).
const FIXED_WINDOW = algorithmScripts().fixed_window;

interface Counter {
  hits: number;
  limit: number;
  windowSeconds: number;
}
interface Result {
  count: number;
  remaining: number;
  resetMs: number;
  over: boolean;
  blockedMs: number;
}

const sources = { fixed_window: SOURCE };

/** A loaded script and the client that calls it. */
interface Loaded {
  readonly client: Client;
  readonly sha: string;
}

async function fixedWindow(
  { client, sha }: Loaded,
  keys: readonly string[],
  mode: CallPass,
  counters: readonly Counter[],
  pinnedNowMs?: number,
): Promise<Result[]> {
  const argv: (string | number)[] = [mode];
  const checks = counters.map((c): LimitCheck => ({
    counter: { domain: 'fw', entries: [] },
    spec: { algorithm: 'fixed_window', limit: c.limit, windowSeconds: c.windowSeconds, burst: 0 },
    hits: c.hits,
  }));
  FIXED_WINDOW.pushGroupHeader(argv, checks.length, mode);
  for (const c of checks) FIXED_WINDOW.pushArgs(argv, c);
  if (pinnedNowMs !== undefined) argv.push(pinnedNowMs);
  // Each counter's window key, as this process' clock places the call (lib/fixed_window_step.lua).
  const declared = keys.map((k, i) => FIXED_WINDOW.declaredKey(k, checks[i]!, pinnedNowMs ?? Date.now()));
  const reply = (await client.evalsha(sha, keys.length, ...declared, ...argv)) as unknown[];
  expect(reply).toHaveLength(FIXED_WINDOW.replyWidth * keys.length);
  for (const v of reply) expect(Number.isInteger(v)).toBe(true);
  return checks.map((c, i) => {
    const r = FIXED_WINDOW.decode(reply as number[], i, c, mode);
    // retryAfterMs is resetMs when over, checked in the shared traces.
    return { count: r.used, remaining: r.remaining, resetMs: r.resetMs, over: !r.allowed, blockedMs: r.blockedForMs ?? 0 };
  });
}

/** Keys of one call share one hash tag, so they live in one cluster slot. */
function keysFor(n: number): string[] {
  const tag = randomUUID();
  return Array.from({ length: n }, (_, i) => `fw:{${tag}}:${i}`);
}

// An hour by default: a test that straddles a window boundary would see its count restart.
const one = (hits: number, limit: number, windowSeconds = 3600): Counter => ({ hits, limit, windowSeconds });

/** Waits until the wall clock is well inside a second and a minute, so short windows last. */
async function awayFromBoundaries(): Promise<void> {
  while (Date.now() % 1000 > 600 || Date.now() % 60_000 > 58_000) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe.each([
  ['standalone', () => standaloneTarget(sources)],
  ['cluster', () => clusterTarget(sources)],
] as const)('fixed_window.lua on %s', (_name, makeTarget) => {
  let t: ScriptTarget;
  const call = (keys: readonly string[], mode: CallPass, counters: readonly Counter[], now?: number) =>
    fixedWindow({ client: t.client, sha: t.sha.fixed_window! }, keys, mode, counters, now);

  /** The window keys of counter `base` (lib/fixed_window_step.lua), the latest window first. */
  const windowKeysOf = async (base: string): Promise<string[]> => windowKeysAmong(await t.allKeys(), base);
  /** The count in `base`'s latest window; null when it has none. */
  const storedCount = async (base: string): Promise<number | null> => {
    const [latest] = await windowKeysOf(base);
    return latest === undefined ? null : Number(await t.client.get(latest));
  };

  beforeAll(async () => {
    t = await makeTarget();
  }, 90_000);
  afterAll(async () => {
    await t?.stop();
  }, 30_000);

  it('counts exactly and marks the calls over the limit', async () => {
    const [key] = keysFor(1) as [string];
    const seen: Result[] = [];
    for (let i = 0; i < 5; i++) seen.push(...(await call([key], MODE_COUNT_ALL, [one(1, 3)])));
    expect(seen.map((r) => r.count)).toEqual([1, 2, 3, 4, 5]);
    expect(seen.map((r) => r.remaining)).toEqual([2, 1, 0, 0, 0]);
    expect(seen.map((r) => r.over)).toEqual([false, false, false, true, true]);
    const [big] = await call([key], MODE_COUNT_ALL, [one(7, 3)]);
    expect(big).toMatchObject({ count: 12, remaining: 0, over: true });
    expect(await storedCount(key)).toBe(12);
  });

  it('checks several counters of one slot in one call, each with its own limit and window', async () => {
    const keys = keysFor(3);
    await awayFromBoundaries();
    const calledAt = Date.now();
    const results = await call(keys, MODE_COUNT_ALL, [one(1, 1, 1), one(2, 10, 60), one(3, 2, 3600)]);
    expect(results.map((r) => [r.count, r.remaining, r.over])).toEqual([
      [1, 0, false],
      [2, 8, false],
      [3, 0, true],
    ]);
    const windows = [1, 60, 3600];
    for (const [i, key] of keys.entries()) {
      const ttl = await t.client.pttl((await windowKeysOf(key))[0]!);
      const elapsed = Date.now() - calledAt;
      const w = windows[i]! * 1000;
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(2 * w);
      expect(results[i]!.resetMs).toBeGreaterThanOrEqual(1);
      expect(results[i]!.resetMs).toBeLessThanOrEqual(w);
      // The TTL ends one window after this window ends: the difference is the time between the
      // call and this read, at most what this test measured around both (not a fixed 300 ms).
      expect(ttl).toBeLessThanOrEqual(results[i]!.resetMs + w);
      expect(results[i]!.resetMs + w - ttl).toBeLessThanOrEqual(elapsed + 5);
    }
  });

  it('sets the expiry at the end of the window after the one counted in, for a pinned clock too', async () => {
    // One window past the count's own (as the reference's per-window keys live one window past
    // their last write): a clock that steps back across the edge still finds the count.
    const windowMs = 60_000;
    const nextWindow = (Math.floor(Date.now() / windowMs) + 1) * windowMs;
    const [key] = keysFor(1) as [string];
    const [first] = await call([key], MODE_COUNT_ALL, [one(1, 5, 60)], nextWindow + 12_345);
    expect(first).toEqual({ count: 1, remaining: 4, resetMs: windowMs - 12_345, over: false, blockedMs: 0 });
    const windowKey = fixedWindowKey(key, 60, nextWindow);
    expect(await t.client.call('PEXPIRETIME', windowKey)).toBe(nextWindow + 2 * windowMs);
    // Later calls of the same window keep that expiry.
    const [second] = await call([key], MODE_COUNT_ALL, [one(1, 5, 60)], nextWindow + 50_000);
    expect(second).toEqual({ count: 2, remaining: 3, resetMs: 10_000, over: false, blockedMs: 0 });
    expect(await t.client.call('PEXPIRETIME', windowKey)).toBe(nextWindow + 2 * windowMs);
  });

  it('counts a call at exactly the window end in the next window, while the old key still exists', async () => {
    // Redis expires a key only once now > its expiry; the window is in the key's name, not its TTL.
    const windowMs = 1000;
    const edge = (Math.floor(Date.now() / windowMs) + 100) * windowMs;
    const [key] = keysFor(1) as [string];
    expect((await call([key], MODE_COUNT_ALL, [one(1, 1, 1)], edge - 1))[0]).toMatchObject({ count: 1, over: false, blockedMs: 1 });
    expect((await call([key], MODE_COUNT_ALL, [one(1, 1, 1)], edge - 1))[0]).toMatchObject({ count: 2, over: true });
    expect(await t.client.exists(fixedWindowKey(key, 1, edge - 1))).toBe(1);
    expect((await call([key], MODE_COUNT_ALL, [one(1, 1, 1)], edge))[0]).toEqual({
      count: 1,
      remaining: 0,
      resetMs: 1000,
      over: false,
      blockedMs: 1000,
    });
  });

  it("counts a clock more than one window back in that window's own key, while Redis has not expired it (as the reference's keys)", async () => {
    // The memory backend keeps only the latest two windows (memory-algorithms.test.ts).
    const w = 10_000;
    const edge = (Math.floor(Date.now() / w) + 10) * w;
    const [key] = keysFor(1) as [string];
    expect((await call([key], MODE_COUNT_ALL, [one(2, 3, 10)], edge))[0]!.count).toBe(2);
    expect((await call([key], MODE_COUNT_ALL, [one(2, 3, 10)], edge + 25_000))[0]!.count).toBe(2);
    expect((await call([key], MODE_COUNT_ALL, [one(1, 3, 10)], edge + 5_000))[0]).toEqual({
      count: 3,
      remaining: 0,
      resetMs: 5_000,
      over: false,
      blockedMs: 5_000,
    });
    expect((await call([key], MODE_COUNT_ALL, [one(0, 3, 10)], edge + 5_000))[0]!.count).toBe(3);
    expect(await t.client.call('PEXPIRETIME', fixedWindowKey(key, 10, edge))).toBe(edge + 2 * w);
    expect((await call([key], MODE_COUNT_ALL, [one(1, 3, 10)], edge + 29_999))[0]!.count).toBe(3);
  });

  it("counts in Redis' window when the caller's clock declared another window's key", async () => {
    const w = 60_000;
    const edge = (Math.floor(Date.now() / w) + 3) * w;
    const [key] = keysFor(1) as [string];
    const sha = t.sha.fixed_window!;
    // The caller's clock is 1 ms behind: it declares the window before the edge.
    expect(await t.client.evalsha(sha, 1, fixedWindowKey(key, 60, edge - 1), 'count', 2, 10, 60, edge)).toEqual([2, w]);
    expect(await t.client.get(fixedWindowKey(key, 60, edge))).toBe('2');
    expect(await t.client.exists(fixedWindowKey(key, 60, edge - 1))).toBe(0);
    // Declared as Redis' clock places it: the same key.
    expect(await t.client.evalsha(sha, 1, fixedWindowKey(key, 60, edge), 'count', 1, 10, 60, edge + 5)).toEqual([3, w - 5]);
  });

  it("ignores a value of another type at the counter's name: the window counts, with its expiry", async () => {
    const [key] = keysFor(1) as [string];
    await t.client.hset(key, 'a', '1');
    expect((await call([key], MODE_COUNT_ALL, [one(1, 10)]))[0]!.count).toBe(1);
    expect((await call([key], MODE_COUNT_ALL, [one(1, 10)]))[0]!.count).toBe(2);
    expect(await t.client.pttl((await windowKeysOf(key))[0]!)).toBeGreaterThan(0);
    await t.client.del(key);
  });

  it('aligns windows to the epoch', async () => {
    const windowMs = 3_600_000;
    const start = (Math.floor(Date.now() / windowMs) + 1) * windowMs;
    const [a, b, c] = keysFor(3) as [string, string, string];
    expect((await call([a], MODE_COUNT_ALL, [one(0, 1, 3600)], start))[0]!.resetMs).toBe(windowMs);
    expect((await call([b], MODE_COUNT_ALL, [one(0, 1, 3600)], start + windowMs - 1))[0]!.resetMs).toBe(1);
    expect((await call([c], MODE_COUNT_ALL, [one(0, 1, 7)], 7000 * 1_000_000 + 6999))[0]!.resetMs).toBe(1);
  });

  it('starts a fresh count once the window has ended', async () => {
    const [key] = keysFor(1) as [string];
    const [first] = await call([key], MODE_COUNT_ALL, [one(3, 5, 1)]);
    expect(first!.count).toBe(3);
    await new Promise((resolve) => setTimeout(resolve, first!.resetMs + 20));
    expect((await call([key], MODE_COUNT_ALL, [one(1, 5, 1)]))[0]!.count).toBe(1);
    // Gone once the window after that one has ended too.
    await new Promise((resolve) => setTimeout(resolve, 2020));
    expect(await windowKeysOf(key)).toEqual([]);
  });

  it('peeks without creating or changing a key', async () => {
    const [absent, present] = keysFor(2) as [string, string];
    const [peeked] = await call([absent], MODE_COUNT_ALL, [one(0, 4)]);
    expect(peeked).toMatchObject({ count: 0, remaining: 4, over: false });
    expect(await t.allKeys()).not.toContainEqual(expect.stringContaining(absent));

    await call([present], MODE_COUNT_ALL, [one(5, 4)]);
    const [windowKey] = await windowKeysOf(present);
    const ttl = await t.client.pttl(windowKey!);
    const [again] = await call([present], MODE_COUNT_ALL, [one(0, 4)]);
    expect(again).toMatchObject({ count: 5, remaining: 0, over: true });
    expect(await storedCount(present)).toBe(5);
    expect(await t.client.pttl(windowKey!)).toBeLessThanOrEqual(ttl);
  });

  it("takes an older floodgate's plain-integer count as the current window's, once, and leaves no key without a TTL", async () => {
    const [key] = keysFor(1) as [string];
    await t.client.set(key, '7');
    expect(await t.client.pttl(key)).toBe(-1);
    // Peeked: counted, nothing written.
    expect((await call([key], MODE_COUNT_ALL, [one(0, 10)]))[0]!.count).toBe(7);
    expect(await t.client.get(key)).toBe('7');
    // The first hit moves it into the window's key (with its expiry) and removes it: a plain
    // integer names no window, so it must not count again in the next one.
    expect((await call([key], MODE_COUNT_ALL, [one(1, 10)]))[0]!.count).toBe(8);
    expect(await t.client.exists(key)).toBe(0);
    expect(await storedCount(key)).toBe(8);
    const ttl = await t.client.pttl((await windowKeysOf(key))[0]!);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(2 * 3_600_000);
  });

  it('keeps an older floodgate\'s "start:count:previous" counts through a rolling upgrade, each for its own window', async () => {
    const w = 3_600_000;
    const start = (Math.floor(Date.now() / w) + 1) * w;
    const [current, stepped, stale] = keysFor(3) as [string, string, string];
    // Written by an older pod: window `start` holds 5, the one before 2.
    for (const k of [current, stepped, stale]) await t.client.set(k, `${start}:5:2`, 'PXAT', start + 2 * w);
    expect((await call([current], MODE_COUNT_ALL, [one(1, 10)], start + 10))[0]!.count).toBe(6);
    expect((await call([current], MODE_COUNT_ALL, [one(1, 10)], start + 20))[0]!.count).toBe(7);
    // The clock one window back: the previous count.
    expect((await call([stepped], MODE_COUNT_ALL, [one(1, 10)], start - 10))[0]!.count).toBe(3);
    // The window after: the old value holds nothing for it.
    expect((await call([stale], MODE_COUNT_ALL, [one(1, 10)], start + w + 10))[0]!.count).toBe(1);
    // The old pods' value is left as it is (they may still be counting in it).
    expect(await t.client.get(current)).toBe(`${start}:5:2`);
  });

  it("starts a window of a minute or less afresh at an upgrade: its first hits do not read an older floodgate's key", async () => {
    const w = 60_000;
    const start = (Math.floor(Date.now() / w) + 5) * w;
    const [minute, plain] = keysFor(2) as [string, string];
    await t.client.set(minute, `${start}:5:2`, 'PXAT', start + 2 * w);
    await t.client.set(plain, '7', 'PXAT', start + 2 * w);
    const counts = await call([minute, plain], MODE_COUNT_ALL, [one(1, 10, 60), one(1, 10, 60)], start + 10);
    expect(counts.map((r) => r.count)).toEqual([1, 1]);
    expect(await t.client.get(plain)).toBe('7');
  });

  it('stop mode: increments each key that would go over and holds back the others (the reference), all of them otherwise', async () => {
    const [a, b] = keysFor(2) as [string, string];
    await call([b], MODE_COUNT_ALL, [one(2, 10)]);
    const blocked = await call([a, b], MODE_STOP, [one(1, 10), one(1, 2)]);
    expect(blocked.map((r) => [r.count, r.remaining, r.over])).toEqual([
      [0, 10, false],
      [3, 0, true],
    ]);
    expect(await windowKeysOf(a)).toEqual([]);
    expect(await storedCount(b)).toBe(3);

    const passed = await call([a, b], MODE_STOP, [one(1, 10), one(0, 5)]);
    expect(passed.map((r) => [r.count, r.over])).toEqual([
      [1, false],
      [3, false],
    ]);
    expect(await storedCount(a)).toBe(1);
    expect(await t.client.pttl((await windowKeysOf(a))[0]!)).toBeGreaterThan(0);

    // A peeked key that is already over holds back the others too: the request is denied anyway.
    const peekOver = await call([a, b], MODE_STOP, [one(1, 10), one(0, 2)]);
    expect(peekOver.map((r) => [r.count, r.over])).toEqual([
      [1, false],
      [3, true],
    ]);
    expect(await storedCount(a)).toBe(1);
  });

  it("stop mode decides each unit (a request's counters) of a call on its own, in order, as separate calls would", async () => {
    const [a, b, c] = keysFor(3) as [string, string, string];
    const sha = t.sha.fixed_window!;
    const now = (Math.floor(Date.now() / 3_600_000) + 1) * 3_600_000 + 5;
    const key = (k: string) => fixedWindowKey(k, 3600, now);
    // Unit 1 = [a 1 of 1, b 1 of 10]: none would go over, both counted. Unit 2 = [a 1 of 1, c 1 of
    // 10]: a would go over (1 + 1 > 1), so only a is charged and c is held back. Unit 3 = [b]
    // alone: counted.
    const reply = (await t.client.evalsha(
      sha,
      5,
      key(a),
      key(b),
      key(a),
      key(c),
      key(b),
      'stop',
      2,
      1,
      1,
      3600,
      1,
      10,
      3600,
      2,
      1,
      1,
      3600,
      1,
      10,
      3600,
      1,
      1,
      10,
      3600,
      now,
    )) as number[];
    expect([0, 1, 2, 3, 4].map((j) => reply[2 * j])).toEqual([1, 1, 2, 0, 2]);
    expect([await storedCount(a), await storedCount(b), await storedCount(c)]).toEqual([2, 2, null]);
  });

  it("stop mode: the issue's example, counts 8/10 and 3/10 and 5 hits on both end at 13 and 3", async () => {
    const [a, b, c] = keysFor(3) as [string, string, string];
    await call([a, b], MODE_COUNT_ALL, [one(8, 10), one(3, 10)]);
    const results = await call([a, b, c], MODE_STOP, [one(5, 10), one(5, 10), one(6, 5)]);
    expect(results.map((r) => [r.count, r.remaining, r.over])).toEqual([
      [13, 0, true],
      [3, 7, false],
      [6, 0, true],
    ]);
    expect([await storedCount(a), await storedCount(b), await storedCount(c)]).toEqual([13, 3, 6]);
  });

  it('look mode judges every key and charges none', async () => {
    const [a, b] = keysFor(2) as [string, string];
    await call([b], MODE_COUNT_ALL, [one(2, 10)]);
    const looked = await call([a, b], MODE_LOOK, [one(3, 2), one(1, 2)]);
    expect(looked.map((r) => [r.count, r.over])).toEqual([
      [0, true],
      [2, true],
    ]);
    expect(await windowKeysOf(a)).toEqual([]);
    expect(await storedCount(b)).toBe(2);
  });

  it('is atomic: 200 concurrent EVALSHA calls with limit 50 see counts 1..200 exactly once', async () => {
    const [key] = keysFor(1) as [string];
    const calls = Array.from({ length: 200 }, (_, i) =>
      fixedWindow({ client: t.clients[i % t.clients.length]!, sha: t.sha.fixed_window! }, [key], MODE_COUNT_ALL, [one(1, 50)]),
    );
    const results = (await Promise.all(calls)).map((r) => r[0]!);
    expect(results.map((r) => r.count).sort((x, y) => x - y)).toEqual(Array.from({ length: 200 }, (_, i) => i + 1));
    expect(results.filter((r) => !r.over)).toHaveLength(50);
    expect(results.filter((r) => !r.over).every((r) => r.count <= 50)).toBe(true);
    expect(await storedCount(key)).toBe(200);
  });

  it('is atomic in stop mode: under concurrency exactly `limit` requests get through', async () => {
    const keys = keysFor(2);
    const calls = Array.from({ length: 120 }, (_, i) =>
      fixedWindow({ client: t.clients[i % t.clients.length]!, sha: t.sha.fixed_window! }, keys, MODE_STOP, [one(1, 100), one(1, 30)]),
    );
    const results = await Promise.all(calls);
    expect(results.filter((r) => !r[0]!.over && !r[1]!.over)).toHaveLength(30);
    // The 90 others went over on the tight key, which counts them (the reference's rule).
    expect([await storedCount(keys[0]!), await storedCount(keys[1]!)]).toEqual([30, 120]);
  });

  it('rejects malformed arguments with a clear error', async () => {
    const [key] = keysFor(1) as [string];
    const sha = t.sha.fixed_window!;
    await expect(t.client.evalsha(sha, 1, key, 'count', 1, 10)).rejects.toThrow(/fixed_window: 1 keys need 4 or 5 ARGV, got 3/);
    await expect(t.client.evalsha(sha, 1, key, 'count', 'x', 10, 60)).rejects.toThrow(/key 1 needs integer hits/);
    await expect(t.client.evalsha(sha, 1, key, 'count', 1.5, 10, 60)).rejects.toThrow(/key 1 needs integer hits/);
    // Hits go to INCRBY as written: only plain decimal digits are taken.
    for (const written of ['1.0', '01', '1e0', ' 1', '0x1']) {
      await expect(t.client.evalsha(sha, 2, key, key, 'count', 1, 10, 60, written, 10, 60), written).rejects.toThrow(/key 2 needs integer hits/);
    }
    await expect(t.client.evalsha(sha, 1, key, 'count', 1, -1, 60)).rejects.toThrow(/limit >= 0/);
    await expect(t.client.evalsha(sha, 1, key, 'count', 1, 10, 0)).rejects.toThrow(/window >= 1/);
    await expect(t.client.evalsha(sha, 1, key, 6, 1, 10, 60)).rejects.toThrow(
      /mode \(ARGV\[1\]\) must be one of 'count', 'stop', 'look', 'count:named', 'stop:named', 'look:named', got '6'/,
    );
    // Named counters: each named in ARGV (4 a counter), one key declared.
    await expect(t.client.evalsha(sha, 1, key, 'count:named', 1, 10, 60)).rejects.toThrow(/mode count:named needs 1 key and 4 ARGV per counter/);
    await expect(t.client.evalsha(sha, 1, key, 'count', 1, 10, 60, 'soon')).rejects.toThrow(/pinned now/);
    // A malformed second counter: the first is not counted either.
    await expect(t.client.evalsha(sha, 2, key, key, 'count', 1, 10, 60, 1, 10, 'x')).rejects.toThrow(/key 2 needs integer hits/);
    // Stop mode takes units, each led by its key count (lib/read_lists.lua).
    await expect(t.client.evalsha(sha, 1, key, 'stop', 0, 1, 10, 60)).rejects.toThrow(/fixed_window: unit 1: key count \(ARGV\[2\]\) must be/);
    await expect(t.client.evalsha(sha, 1, key, 'stop', 2, 1, 10, 60)).rejects.toThrow(
      /fixed_window: unit 1: 2 keys from KEYS\[1\] run past the 1 keys/,
    );
    await expect(t.client.evalsha(sha, 2, key, key, 'stop', 1, 1, 10, 60, 1, 1, 'x', 60)).rejects.toThrow(
      /fixed_window: key 2 needs integer hits/,
    );
    expect(await t.allKeys()).not.toContainEqual(expect.stringContaining(key));
  });

  it('leaves no key without a TTL after a random load', async () => {
    const keys = Array.from({ length: 20 }, () => keysFor(3));
    let seed = 42;
    const random = (n: number): number => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
    const calls = Array.from({ length: 400 }, (_, i) => {
      const group = keys[random(keys.length)]!;
      const counters = group.map(() => one(random(4), 1 + random(20), [1, 60, 3600][random(3)]));
      return fixedWindow({ client: t.clients[i % t.clients.length]!, sha: t.sha.fixed_window! }, group, MODES[random(3)]!, counters);
    });
    await Promise.all(calls);
    // This load's keys only: other tests pin their clocks hours ahead.
    const all = (await t.allKeys()).filter((k) => keys.some((group) => group.some((base) => k.startsWith(`${base}:`))));
    expect(all.length).toBeGreaterThan(0);
    const ttls = await Promise.all(all.map((k) => t.client.pttl(k)));
    // -2: a 1 s key that expired since KEYS ran, which is fine; -1 would be a key without TTL.
    const bad = all.filter((_, i) => ttls[i] === -1 || ttls[i]! > 2 * 3_600_000);
    expect(ttls.filter((ttl) => ttl > 0).length).toBeGreaterThan(all.length / 2);
    expect(bad).toEqual([]);
  });
});

describe('fixed_window.lua key routing', () => {
  it('needs every key of a call in one cluster slot', async () => {
    // Documented precondition, not script logic: the cluster refuses keys from several slots.
    const cluster = await startCluster({ masters: 3, replicasPerMaster: 0 });
    const node = cluster.masters()[0]!;
    const client = new Redis({ host: node.host, port: node.port, maxRetriesPerRequest: 1 });
    try {
      await expect(client.eval(SOURCE, 2, 'fw:{x}:a', 'fw:{y}:a', 'count', 1, 1, 60, 1, 1, 60)).rejects.toThrow(/CROSSSLOT/);
    } finally {
      client.disconnect();
      await cluster.stop();
    }
  }, 60_000);
});
