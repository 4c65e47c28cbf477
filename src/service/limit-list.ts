import type { LimitResult } from '../limiter/limiter';

/**
 * The limit of a `rate_limits` list whose numbers the descriptor's one status carries (issue
 * 21): of the denying limits, the one with the longest reset; when all admit, the one with the
 * fewest remaining, and of those the longest reset. Ties go to the limit listed first.
 */
export function chosenLimitIndex(results: readonly LimitResult[]): number {
  let chosen = 0;
  for (let j = 1; j < results.length; j++) {
    if (precedes(results[j] as LimitResult, results[chosen] as LimitResult)) chosen = j;
  }
  return chosen;
}

/** Whether `a`, listed after `b`, is the better choice (strictly). */
function precedes(a: LimitResult, b: LimitResult): boolean {
  if (a.allowed !== b.allowed) return !a.allowed;
  if (!a.allowed) return a.resetMs > b.resetMs;
  if (a.remaining !== b.remaining) return a.remaining < b.remaining;
  return a.resetMs > b.resetMs;
}

/** Retry-After of a denied list: until every denying limit admits again. */
export function listRetryAfterMs(results: readonly LimitResult[]): number {
  let ms = 0;
  for (const r of results) if (!r.allowed) ms = Math.max(ms, r.retryAfterMs);
  return ms;
}
