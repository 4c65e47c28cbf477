import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Algorithm } from '../../../src/domain/algorithm';
import type { LimitCheck } from '../../../src/limiter/limiter';
import { COUNTER_BYTES } from '../../../src/limiter/memory/counter-table';
import { MemoryLimiter } from '../../../src/limiter/memory/memory-limiter';

/** 2024-01-01T12:00:00.000Z — a whole minute, hour and day of the epoch. */
const NOON = Date.UTC(2024, 0, 1, 12, 0, 0, 0);

const OPTIONS = { deadline: Number.MAX_SAFE_INTEGER, stopIncrementWhenOverLimit: false };
const STOP = { deadline: Number.MAX_SAFE_INTEGER, stopIncrementWhenOverLimit: true };

function check(
  value: string,
  limit: number,
  hits = 1,
  spec: { windowSeconds?: number; algorithm?: Algorithm; domain?: string } = {},
): LimitCheck {
  return {
    counter: { domain: spec.domain ?? 'd', entries: [{ key: 'k', value }] },
    spec: { algorithm: spec.algorithm ?? 'fixed_window', limit, windowSeconds: spec.windowSeconds ?? 60, burst: limit },
    hits,
  };
}

let limiters: MemoryLimiter[] = [];

/** A limiter on a hand-driven clock. */
function setup(start = NOON): { limiter: MemoryLimiter; clock: { now: number } } {
  const clock = { now: start };
  const limiter = new MemoryLimiter({ now: () => clock.now, sweepIntervalMs: 3_600_000 });
  limiters.push(limiter);
  return { limiter, clock };
}

async function one(limiter: MemoryLimiter, c: LimitCheck, options = OPTIONS) {
  const [result] = await limiter.check([c], options);
  if (result === undefined) throw new Error('no result');
  return result;
}

afterEach(async () => {
  await Promise.all(limiters.map((l) => l.close()));
  limiters = [];
});

describe('MemoryLimiter fixed windows', () => {
  it('aligns windows to the epoch: at 12:00:59.200 a minute window resets in 800 ms', async () => {
    const { limiter, clock } = setup(NOON + 59_200);
    const r = await one(limiter, check('a', 5));
    expect(r.resetMs).toBe(800);
    expect(r.used).toBe(1);

    clock.now = NOON + 60_000; // 12:01:00.000: a fresh window
    const fresh = await one(limiter, check('a', 5));
    expect(fresh.used).toBe(1);
    expect(fresh.remaining).toBe(4);
    expect(fresh.resetMs).toBe(60_000);
  });

  it('keeps counting inside one window and resets at its end, not 60 s after the first hit', async () => {
    const { limiter, clock } = setup(NOON + 30_000);
    expect((await one(limiter, check('a', 5))).used).toBe(1);
    clock.now = NOON + 59_999;
    const last = await one(limiter, check('a', 5));
    expect(last.used).toBe(2);
    expect(last.resetMs).toBe(1);
    clock.now = NOON + 60_000;
    expect((await one(limiter, check('a', 5))).used).toBe(1);
  });

  it('aligns hour, day and second windows too', async () => {
    const { limiter } = setup(NOON + 15 * 60_000 + 250); // 12:15:00.250
    expect((await one(limiter, check('h', 5, 1, { windowSeconds: 3600 }))).resetMs).toBe(45 * 60_000 - 250);
    expect((await one(limiter, check('d', 5, 1, { windowSeconds: 86400 }))).resetMs).toBe(11 * 3_600_000 + 45 * 60_000 - 250);
    expect((await one(limiter, check('s', 5, 1, { windowSeconds: 1 }))).resetMs).toBe(750);
  });

  it('counts remaining down exactly and is over only when count > limit', async () => {
    const { limiter } = setup();
    const seen: Array<[boolean, number, number]> = [];
    for (let i = 0; i < 5; i++) {
      const r = await one(limiter, check('a', 3));
      seen.push([r.allowed, r.used, r.remaining]);
    }
    expect(seen).toEqual([
      [true, 1, 2],
      [true, 2, 1],
      [true, 3, 0],
      [false, 4, 0],
      [false, 5, 0],
    ]);
  });

  it('counts a multi-hit request as a whole and goes over when it crosses the limit', async () => {
    const { limiter } = setup();
    expect(await one(limiter, check('a', 10, 7))).toMatchObject({ allowed: true, used: 7, remaining: 3 });
    expect(await one(limiter, check('a', 10, 3))).toMatchObject({ allowed: true, used: 10, remaining: 0 });
    expect(await one(limiter, check('a', 10, 1))).toMatchObject({ allowed: false, used: 11, remaining: 0 });
  });

  it('counts hits even when over, as the reference does (used keeps growing)', async () => {
    const { limiter } = setup();
    await one(limiter, check('a', 1));
    await one(limiter, check('a', 1));
    await one(limiter, check('a', 1));
    const peek = await one(limiter, check('a', 1, 0));
    expect(peek.used).toBe(3);
    expect(peek.allowed).toBe(false);
  });

  it('gives retryAfterMs = time to the window end when denied, 0 when allowed', async () => {
    const { limiter } = setup(NOON + 45_500);
    const ok = await one(limiter, check('a', 1));
    expect(ok.allowed).toBe(true);
    expect(ok.retryAfterMs).toBe(0);
    const denied = await one(limiter, check('a', 1));
    expect(denied.allowed).toBe(false);
    expect(denied.retryAfterMs).toBe(14_500);
    expect(denied.resetMs).toBe(14_500);
  });
});

describe('MemoryLimiter peeks and zero limits', () => {
  it('hits 0 peeks: reports the count and creates no counter', async () => {
    const { limiter } = setup();
    const r = await one(limiter, check('a', 5, 0));
    expect(r).toMatchObject({ allowed: true, used: 0, remaining: 5 });
    expect(limiter.size).toBe(0);
    await one(limiter, check('a', 5, 2));
    expect(await one(limiter, check('a', 5, 0))).toMatchObject({ allowed: true, used: 2, remaining: 3 });
    expect(await one(limiter, check('a', 5, 0))).toMatchObject({ used: 2 });
    expect(limiter.size).toBe(1);
  });

  it('limit 0 is always over with hits >= 1', async () => {
    const { limiter } = setup();
    expect(await one(limiter, check('a', 0))).toMatchObject({ allowed: false, used: 1, remaining: 0 });
    expect(await one(limiter, check('b', 0, 5))).toMatchObject({ allowed: false, used: 5, remaining: 0 });
    expect((await one(limiter, check('a', 0))).allowed).toBe(false);
  });
});

describe('MemoryLimiter counter identity', () => {
  it('different windows and algorithms of the same entries are different counters', async () => {
    const { limiter } = setup();
    await one(limiter, check('a', 10, 4, { windowSeconds: 60 }));
    expect((await one(limiter, check('a', 10, 1, { windowSeconds: 3600 }))).used).toBe(1);
    expect((await one(limiter, check('a', 10, 1, { windowSeconds: 60, algorithm: 'sliding_window' }))).used).toBe(1);
    expect((await one(limiter, check('a', 10, 1, { windowSeconds: 60 }))).used).toBe(5);
    expect(limiter.size).toBe(3);
  });

  it('a different limit keeps the count (raising a limit does not reset it)', async () => {
    const { limiter } = setup();
    await one(limiter, check('a', 3, 3));
    expect(await one(limiter, check('a', 3))).toMatchObject({ allowed: false, used: 4 });
    expect(await one(limiter, check('a', 10))).toMatchObject({ allowed: true, used: 5, remaining: 5 });
  });

  it('different values, keys and domains are different counters', async () => {
    const { limiter } = setup();
    await one(limiter, check('a', 10, 3));
    expect((await one(limiter, check('b', 10))).used).toBe(1);
    expect((await one(limiter, check('a', 10, 1, { domain: 'other' }))).used).toBe(1);
    const twoEntries: LimitCheck = {
      counter: {
        domain: 'd',
        entries: [
          { key: 'k', value: 'a' },
          { key: 'k2', value: 'x' },
        ],
      },
      spec: { algorithm: 'fixed_window', limit: 10, windowSeconds: 60, burst: 10 },
      hits: 1,
    };
    expect((await one(limiter, twoEntries)).used).toBe(1);
  });
});

describe('MemoryLimiter stopIncrementWhenOverLimit', () => {
  it('increments each fixed-window counter that would go over and holds back the others (the reference)', async () => {
    const { limiter } = setup();
    await one(limiter, check('tight', 2, 2));
    const results = await limiter.check([check('loose', 100, 1), check('tight', 2, 1)], STOP);
    expect(results.map((r) => [r.allowed, r.used])).toEqual([
      [true, 0],
      [false, 3],
    ]);
    // The loose counter did not move; the tight one counted the hit that went over.
    expect((await one(limiter, check('loose', 100, 0))).used).toBe(0);
    expect((await one(limiter, check('tight', 2, 0))).used).toBe(3);
    expect(limiter.size).toBe(1);
  });

  it('increments everything when no check would go over', async () => {
    const { limiter } = setup();
    const results = await limiter.check([check('a', 5, 2), check('b', 5, 5)], STOP);
    expect(results.map((r) => [r.allowed, r.used, r.remaining])).toEqual([
      [true, 2, 3],
      [true, 5, 0],
    ]);
    expect((await one(limiter, check('a', 5, 0))).used).toBe(2);
    expect((await one(limiter, check('b', 5, 0))).used).toBe(5);
  });

  it('without the option, the other counters are consumed', async () => {
    const { limiter } = setup();
    await one(limiter, check('tight', 2, 2));
    await limiter.check([check('loose', 100, 1), check('tight', 2, 1)], OPTIONS);
    expect((await one(limiter, check('loose', 100, 0))).used).toBe(1);
    expect((await one(limiter, check('tight', 2, 0))).used).toBe(3);
  });
});

describe('MemoryLimiter memory is bounded', () => {
  it('sweep() drops expired counters: a fixed window is kept until the window after it ends', async () => {
    const { limiter, clock } = setup(NOON + 10_000);
    await one(limiter, check('minute', 10, 1, { windowSeconds: 60 }));
    await one(limiter, check('second', 10, 1, { windowSeconds: 1 }));
    expect(limiter.size).toBe(2);
    clock.now = NOON + 11_999; // a clock stepping back 1 ms would still find the second's count
    limiter.sweep();
    expect(limiter.size).toBe(2);
    clock.now = NOON + 12_000; // the window after the second's ended, the minute one did not
    limiter.sweep();
    expect(limiter.size).toBe(1);
    clock.now = NOON + 120_000;
    limiter.sweep();
    expect(limiter.size).toBe(0);
  });

  it('an expired counter is not counted even before it is swept', async () => {
    const { limiter, clock } = setup(NOON + 59_000);
    await one(limiter, check('a', 2, 2));
    clock.now = NOON + 61_000;
    expect(await one(limiter, check('a', 2))).toMatchObject({ allowed: true, used: 1 });
  });

  it('sweeps on its own timer', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    try {
      const clock = { now: NOON + 59_990 };
      const limiter = new MemoryLimiter({ now: () => clock.now, sweepIntervalMs: 5 });
      limiters.push(limiter);
      await one(limiter, check('a', 10));
      expect(limiter.size).toBe(1);
      clock.now = NOON + 120_000;
      vi.advanceTimersByTime(4);
      expect(limiter.size).toBe(1);
      vi.advanceTimersByTime(1);
      expect(limiter.size).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });

  it('close() drops everything', async () => {
    const { limiter } = setup();
    await one(limiter, check('a', 10));
    await limiter.close();
    expect(limiter.size).toBe(0);
  });
});

describe('MemoryLimiter results and concurrency', () => {
  it('returns results in the same order as the checks', async () => {
    const { limiter } = setup();
    await one(limiter, check('b', 10, 4));
    const results = await limiter.check([check('a', 10, 1), check('b', 10, 1), check('c', 1, 2), check('a', 10, 0)], OPTIONS);
    expect(results.map((r) => [r.used, r.allowed])).toEqual([
      [1, true],
      [5, true],
      [2, false],
      [1, true],
    ]);
  });

  it('200 concurrent calls against a limit of 50 allow exactly 50', async () => {
    const { limiter } = setup();
    const results = await Promise.all(Array.from({ length: 200 }, () => one(limiter, check('hot', 50))));
    expect(results.filter((r) => r.allowed)).toHaveLength(50);
    expect(results.map((r) => r.used).sort((a, b) => a - b)).toEqual(Array.from({ length: 200 }, (_, i) => i + 1));
  });

  it('is always healthy', () => {
    const { limiter } = setup();
    expect(limiter.isHealthy()).toBe(true);
  });
});

/** A full garbage collection, so that heap figures show what is kept, not what is garbage. */
function collectGarbage(): void {
  setFlagsFromString('--expose-gc');
  (runInNewContext('gc') as () => void)();
}

describe('MemoryLimiter bounds (issue 8, finding 3)', () => {
  function bounded(maxCounters: number, onEvict?: (n: number) => void): { limiter: MemoryLimiter; clock: { now: number } } {
    const clock = { now: NOON };
    const limiter = new MemoryLimiter({ now: () => clock.now, sweepIntervalMs: 3_600_000, maxCounters, ...(onEvict ? { onEvict } : {}) });
    limiters.push(limiter);
    return { limiter, clock };
  }

  it('keeps at most maxCounters counters, evicting the least recently used, and counts evictions', async () => {
    let evicted = 0;
    const { limiter } = bounded(3, (n) => (evicted += n));
    for (const v of ['a', 'b', 'c']) await one(limiter, check(v, 10, 2));
    // `a` is used again, so `b` is now the least recently used.
    expect(await one(limiter, check('a', 10))).toMatchObject({ used: 3 });
    await one(limiter, check('d', 10));
    expect(limiter.size).toBe(3);
    expect(evicted).toBe(1);
    expect(await one(limiter, check('a', 10))).toMatchObject({ used: 4 });
    expect(await one(limiter, check('c', 10))).toMatchObject({ used: 3 });
    // `b` was evicted: it starts again from zero (and evicts `d`).
    expect(await one(limiter, check('b', 10))).toMatchObject({ used: 1 });
    expect(evicted).toBe(2);
    expect(await one(limiter, check('d', 10))).toMatchObject({ used: 1 });
  });

  it('holds a flood of unique 4 KB values to the cap in bounded memory', async () => {
    const { limiter } = bounded(1000);
    const big = 'x'.repeat(4096);
    collectGarbage();
    const before = process.memoryUsage().heapUsed;
    for (let i = 0; i < 20_000; i++) {
      await limiter.check([check(`${i}:${big}`, 10, 1, { windowSeconds: 86_400 })], OPTIONS);
    }
    collectGarbage();
    const grownMb = (process.memoryUsage().heapUsed - before) / 1e6;
    console.log(`20,000 unique 4 KB values, cap 1000: ${limiter.size} counters, heap +${grownMb.toFixed(1)} MB`);
    expect(limiter.size).toBe(1000);
    // 1000 counters keyed by 4 KB strings would be 4 MB of keys alone; hashed keys are small.
    expect(grownMb).toBeLessThan(5);
  });

  it('hashes long keys: two long values differing only at the end stay two counters', async () => {
    const { limiter } = bounded(10);
    const long = 'y'.repeat(5000);
    expect(await one(limiter, check(long + 'a', 10, 3))).toMatchObject({ used: 3 });
    expect(await one(limiter, check(long + 'b', 10, 1))).toMatchObject({ used: 1 });
    expect(await one(limiter, check(long + 'a', 10, 1))).toMatchObject({ used: 4 });
    expect(limiter.size).toBe(2);
  });

  it('evicts in O(1): 300,000 inserts over a full cache stay fast to the end', () => {
    const { limiter } = bounded(50_000);
    const batch = 50_000;
    const times: number[] = [];
    for (let round = 0; round < 6; round++) {
      const start = performance.now();
      for (let i = 0; i < batch; i++) limiter.checkNow([check(`${round}-${i}`, 10)], false);
      times.push(performance.now() - start);
    }
    console.log(`50,000 inserts per round over a full cache: ${times.map((t) => t.toFixed(0)).join(', ')} ms`);
    expect(limiter.size).toBe(50_000);
    // The late rounds are no slower than a few times the early ones (no slots piling up). The
    // least of two rounds on each side: a busy machine's stall only adds to one round.
    const early = Math.min(times[0] as number, times[1] as number);
    const late = Math.min(times[4] as number, times[5] as number);
    expect(late).toBeLessThan(Math.max(5 * early, 500));
  });
});

describe('MemoryLimiter byte budget (MEMORY_MAX_BYTES, issue 18 finding 15)', () => {
  const MiB = 1024 * 1024;

  it('keeps the counters within maxBytes: COUNTER_BYTES plus the key per counter, the least recently used evicted', async () => {
    let evicted = 0;
    const limiter = new MemoryLimiter({ now: () => NOON, sweepIntervalMs: 3_600_000, maxBytes: MiB, onEvict: (n) => (evicted += n) });
    limiters.push(limiter);
    // Keys of 33 characters: `{d:k=v-000000}:fixed_window:60`.
    const perCounter = COUNTER_BYTES + '{d:k=v-000000}:fixed_window:60'.length;
    for (let i = 0; i < 20_000; i++) await one(limiter, check(`v-${String(i).padStart(6, '0')}`, 10));
    const fits = Math.floor(MiB / perCounter);
    console.log(`byte budget 1 MiB: ${limiter.size} counters kept (${perCounter} B each), ${evicted} evicted`);
    expect(limiter.size).toBe(fits);
    expect(evicted).toBe(20_000 - fits);
    // The newest are kept, the oldest evicted (they start again from zero).
    expect(await one(limiter, check('v-019999', 10))).toMatchObject({ used: 2 });
    expect(await one(limiter, check('v-000000', 10))).toMatchObject({ used: 1 });
  });

  it('counts a sliding log by its entries: a few long logs take the room of many small counters', () => {
    let clock = NOON;
    const logLimiter = new MemoryLimiter({ now: () => clock, sweepIntervalMs: 3_600_000, maxBytes: MiB });
    limiters.push(logLimiter);
    // 1000 calls of one hit each: 1000 entries per log, about 16 KB each against the budget.
    for (let v = 0; v < 100; v++) {
      for (let i = 0; i < 1000; i++) {
        clock++;
        logLimiter.checkNow([check(`log-${v}`, 1000, 1, { algorithm: 'sliding_log', windowSeconds: 3600 })], false);
      }
    }
    console.log(`byte budget 1 MiB: ${logLimiter.size} sliding logs of 1000 entries kept`);
    expect(logLimiter.size).toBeLessThanOrEqual(Math.floor(MiB / (COUNTER_BYTES + 16 * 1000)));
    expect(logLimiter.size).toBeGreaterThan(0);
    // The newest log is whole.
    expect(logLimiter.checkNow([check('log-99', 1000, 0, { algorithm: 'sliding_log', windowSeconds: 3600 })], false)[0]).toMatchObject({
      used: 1000,
    });
  });

  it('maxCounters still bounds the count under a large byte budget', async () => {
    const limiter = new MemoryLimiter({ now: () => NOON, sweepIntervalMs: 3_600_000, maxCounters: 10, maxBytes: 64 * MiB });
    limiters.push(limiter);
    for (let i = 0; i < 100; i++) await one(limiter, check(`c${i}`, 10));
    expect(limiter.size).toBe(10);
  });
});
