import type { Algorithm } from '../../src/domain/algorithm';
import type { LimitSpec } from '../../src/domain/limit-spec';
import type { LimitResult } from '../../src/limiter/limiter';

/**
 * Scripted traces of every algorithm, written once and run
 * against both backends: the memory implementation (unit tests, injected clock) and the Lua
 * scripts on real Redis (integration tests, pinned time). Every expected value was worked out
 * by hand from the semantics in the script headers; both backends must give exactly these.
 */

/**
 * One call: `at` ms after the trace's start, `hits`, and the exact expected result (with
 * blockedForMs where the row gives it; the differential test checks it everywhere).
 */
export interface TraceStep {
  readonly at: number;
  readonly hits: number;
  readonly expected: Omit<LimitResult, 'fromLocalCache'>;
}

/** The part of `result` that `expected` pins: blockedForMs only where the trace gives it. */
export function comparable(result: LimitResult, expected: TraceStep['expected']): Omit<LimitResult, 'fromLocalCache'> {
  const { allowed, used, remaining, resetMs, retryAfterMs, blockedForMs } = result;
  return expected.blockedForMs === undefined
    ? { allowed, used, remaining, resetMs, retryAfterMs }
    : { allowed, used, remaining, resetMs, retryAfterMs, blockedForMs: blockedForMs ?? 0 };
}

export interface Trace {
  readonly name: string;
  readonly spec: LimitSpec;
  readonly steps: readonly TraceStep[];
}

/** 2030-01-01T00:00:00Z: a whole day of the epoch, so every window starts at offset 0. */
export const TRACE_START = Date.UTC(2030, 0, 1);

type Row =
  | readonly [at: number, hits: number, allowed: 0 | 1, used: number, remaining: number, resetMs: number, retryAfterMs: number]
  | readonly [
      at: number,
      hits: number,
      allowed: 0 | 1,
      used: number,
      remaining: number,
      resetMs: number,
      retryAfterMs: number,
      blockedForMs: number,
    ];

function trace(name: string, spec: LimitSpec, rows: readonly Row[]): Trace {
  return {
    name,
    spec,
    steps: rows.map(([at, hits, allowed, used, remaining, resetMs, retryAfterMs, blockedForMs]) => ({
      at,
      hits,
      expected: { allowed: allowed === 1, used, remaining, resetMs, retryAfterMs, ...(blockedForMs === undefined ? {} : { blockedForMs }) },
    })),
  };
}

const spec = (algorithm: Algorithm, limit: number, windowSeconds: number, burst = limit): LimitSpec => ({
  algorithm,
  limit,
  windowSeconds,
  burst,
});

/** limit 0: every hit denied with Retry-After one window, a peek allowed, no state; blocked one window. */
function zeroLimit(algorithm: Algorithm): Trace {
  return trace(`${algorithm}: limit 0`, spec(algorithm, 0, 10), [
    [0, 1, 0, 0, 0, 10_000, 10_000, 10_000],
    [0, 3, 0, 0, 0, 10_000, 10_000, 10_000],
    [5, 0, 1, 0, 0, 10_000, 0, 10_000],
  ]);
}

//                 at     hits ok used rem  reset  retry blocked
const fixedWindow: Trace[] = [
  trace('fixed_window: every hit counts, the window is exact to the millisecond, one window back is kept', spec('fixed_window', 3, 10), [
    [0, 1, 1, 1, 2, 10_000, 0, 0],
    [5_000, 2, 1, 3, 0, 5_000, 0, 5_000],
    [5_000, 0, 1, 3, 0, 5_000, 0, 5_000],
    // Over the limit, and counted (the reference's rule).
    [9_999, 1, 0, 4, 0, 1, 1, 1],
    // The first millisecond of the next window counts there.
    [10_000, 1, 1, 1, 2, 10_000, 0, 0],
    [10_000, 5, 0, 6, 0, 10_000, 10_000, 10_000],
    // The clock steps back one window: that window's count is still there, and counts on.
    [9_000, 0, 0, 4, 0, 1_000, 1_000, 1_000],
    [9_000, 1, 0, 5, 0, 1_000, 1_000, 1_000],
    // A peek of a counter over its limit is over.
    [10_001, 0, 0, 6, 0, 9_999, 9_999, 9_999],
    // Two windows on: a fresh count.
    [25_000, 0, 1, 0, 3, 5_000, 0, 0],
    [25_000, 2, 1, 2, 1, 5_000, 0, 0],
    // (More than one window back the backends differ: memory-algorithms.test.ts and
    // lua-fixed-window.test.ts pin each one's answer.)
    [29_999, 1, 1, 3, 0, 1, 0, 1],
  ]),
  trace('fixed_window: limit 0 counts every hit and is always blocked', spec('fixed_window', 0, 10), [
    [0, 0, 1, 0, 0, 10_000, 0, 10_000],
    [1_000, 1, 0, 1, 0, 9_000, 9_000, 9_000],
    [1_000, 0, 0, 1, 0, 9_000, 9_000, 9_000],
  ]),
];

//                 at     hits ok used rem  reset  retry
const slidingWindow: Trace[] = [
  trace('sliding_window: fills, denies, decays from the previous window, forgets', spec('sliding_window', 10, 10), [
    [0, 4, 1, 4, 6, 20_000, 0],
    [1_000, 6, 1, 10, 0, 19_000, 0],
    // Full: prev × (1 − e/W) + 1 ≤ 10 first holds 1 s into the next window.
    [2_000, 1, 0, 10, 0, 18_000, 9_000],
    [2_000, 0, 1, 10, 0, 18_000, 0],
    // Next window, 1 s in: 10 × 0.9 + 1 = 10 fits exactly.
    [11_000, 1, 1, 10, 0, 19_000, 0],
    // 10 × (1 − e/W) + 3 ≤ 10 at e = 3 s: retry in this window.
    [11_000, 2, 0, 10, 0, 19_000, 2_000],
    [13_000, 2, 1, 10, 0, 17_000, 0],
    // 10 × 0.25 + 4 = 6.5: used rounds up, remaining down.
    [17_500, 1, 1, 7, 3, 12_500, 0],
    // Two windows on: only prev = 4 is left, decaying; reset is this window's end.
    [25_000, 0, 1, 2, 8, 5_000, 0],
    [25_000, 11, 0, 2, 8, 5_000, 5_000],
    [45_000, 0, 1, 0, 10, 0, 0],
  ]),
  trace('sliding_window: fractional estimates in a minute window', spec('sliding_window', 5, 60), [
    [59_000, 5, 1, 5, 0, 61_000, 0],
    [60_000, 1, 0, 5, 0, 60_000, 12_000],
    [72_000, 1, 1, 5, 0, 108_000, 0],
    // hits = limit waits for the whole next window: the 1 hit of this one must decay away.
    [72_001, 5, 0, 5, 0, 107_999, 107_999],
    [100_000, 2, 1, 5, 0, 80_000, 0],
    [110_000, 0, 1, 4, 1, 70_000, 0],
  ]),
  trace('sliding_window: Retry-After to the millisecond while prev decays', spec('sliding_window', 4, 10), [
    [9_000, 3, 1, 3, 1, 11_000, 0],
    [10_000, 0, 1, 3, 1, 10_000, 0],
    // 3 × (1 − e/W) + 2 ≤ 4 first at e = 3334 ms (3 × 6666 = 19998 ≤ 20000; 3 × 6667 is not).
    [10_000, 2, 0, 3, 1, 10_000, 3_334],
    [13_333, 2, 0, 3, 1, 6_667, 1],
    [13_334, 2, 1, 4, 0, 16_666, 0],
    // 3 × 0.2 + 2 = 2.6 and 3 × 0.1 + 2 = 2.3: used rounds up, remaining down.
    [18_000, 0, 1, 3, 1, 12_000, 0],
    [19_000, 0, 1, 3, 1, 11_000, 0],
  ]),
  zeroLimit('sliding_window'),
];

/** token_bucket and gcra share these traces: the same hits must get the same answers. */
function bucketTraces(algorithm: 'token_bucket' | 'gcra'): Trace[] {
  return [
    // 1 token per second, capacity 5.
    trace(`${algorithm}: capacity 5, one token per second`, spec(algorithm, 10, 10, 5), [
      [0, 3, 1, 3, 2, 3_000, 0],
      [0, 3, 0, 3, 2, 3_000, 1_000],
      [1_000, 3, 1, 5, 0, 5_000, 0],
      [1_500, 1, 0, 5, 0, 4_500, 500],
      // More than the capacity never fits: come back when the bucket is full.
      [1_500, 6, 0, 5, 0, 4_500, 4_500],
      [1_500, 0, 1, 5, 0, 4_500, 0],
      [2_000, 1, 1, 5, 0, 5_000, 0],
      [4_333, 0, 1, 3, 2, 2_667, 0],
      [4_333, 2, 1, 5, 0, 4_667, 0],
      [20_000, 5, 1, 5, 0, 5_000, 0],
    ]),
    // 3 per 10 s: one token every 3333⅓ ms, kept exact (no drift from rounding).
    trace(`${algorithm}: a fractional emission interval stays exact`, spec(algorithm, 3, 10, 1), [
      [0, 1, 1, 1, 0, 3_334, 0],
      [3_333, 1, 0, 1, 0, 1, 1],
      [3_334, 1, 1, 1, 0, 3_334, 0],
      [6_667, 1, 0, 1, 0, 1, 1],
      [6_668, 1, 1, 1, 0, 3_334, 0],
    ]),
    zeroLimit(algorithm),
  ];
}

const slidingLog: Trace[] = [
  trace('sliding_log: exact window of 10 s, limit 3', spec('sliding_log', 3, 10), [
    [0, 1, 1, 1, 2, 10_000, 0],
    // Two entries in the same millisecond are two entries.
    [2_000, 2, 1, 3, 0, 10_000, 0],
    [3_000, 1, 0, 3, 0, 9_000, 7_000],
    [3_000, 2, 0, 3, 0, 9_000, 9_000],
    [3_000, 4, 0, 3, 0, 9_000, 9_000],
    // The entry of t = 0 leaves the window at exactly t = 10 s.
    [10_000, 1, 1, 3, 0, 10_000, 0],
    [10_000, 0, 1, 3, 0, 10_000, 0],
    [11_999, 1, 0, 3, 0, 8_001, 1],
    [12_000, 1, 1, 2, 1, 10_000, 0],
    [30_000, 0, 1, 0, 3, 0, 0],
  ]),
  zeroLimit('sliding_log'),
];

/** The traces of every algorithm, by algorithm. */
export const ALGORITHM_TRACES: Readonly<Record<Algorithm, readonly Trace[]>> = {
  fixed_window: fixedWindow,
  sliding_window: slidingWindow,
  token_bucket: bucketTraces('token_bucket'),
  gcra: bucketTraces('gcra'),
  sliding_log: slidingLog,
};

/** A deterministic pseudo-random sequence (LCG), for random traces both backends replay. */
export function seededRandom(seed: number): (n: number) => number {
  let s = seed;
  return (n) => {
    s = (s * 1103515245 + 12345) % 2 ** 31;
    // The high bits: an LCG's low bits repeat with a short period.
    return Math.floor(s / 65_536) % n;
  };
}

/** A random trace over `steps` calls: time moves by 0..maxGapMs, hits 0..maxHits. */
export function randomSteps(seed: number, steps: number, maxGapMs: number, maxHits: number): { at: number; hits: number }[] {
  const random = seededRandom(seed);
  const out: { at: number; hits: number }[] = [];
  let at = random(maxGapMs);
  for (let i = 0; i < steps; i++) {
    out.push({ at, hits: random(maxHits + 1) });
    at += random(maxGapMs + 1);
  }
  return out;
}
