import type { LimitCheck, LimitResult } from '../limiter/limiter';

/** A limit as a tier leaves it: `percent` of it, rounded down. */
export function scaleLimit(limit: number, percent: number): number {
  return percent >= 100 ? limit : Math.floor((limit * percent) / 100);
}

/** The checks with every limit (and bucket capacity) scaled; the counters stay the same. */
export function scaleChecks(checks: readonly LimitCheck[], percent: number): LimitCheck[] {
  return checks.map((c) => ({
    counter: c.counter,
    spec: { ...c.spec, limit: scaleLimit(c.spec.limit, percent), burst: scaleLimit(c.spec.burst, percent) },
    hits: c.hits,
    ...(c.listSize !== undefined ? { listSize: c.listSize } : {}),
    // Limits are no part of a counter's identity.
    ...(c.identity !== undefined ? { identity: c.identity } : {}),
  }));
}

/** What every check of a client in the penalty box gets, without asking the limiter. */
export function penaltyBoxResults(checks: readonly LimitCheck[], msLeft: number): LimitResult[] {
  return checks.map((c) => ({ allowed: false, used: c.hits, remaining: 0, resetMs: msLeft, retryAfterMs: msLeft }));
}
