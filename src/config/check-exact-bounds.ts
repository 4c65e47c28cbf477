import { excerpt } from './quote-excerpt';
import type { Algorithm } from '../domain/algorithm';
import { UNIT_SECONDS, type Unit } from '../domain/units';

/** What the check reads of one rule file's `rate_limit` (parse-rule-file's RateLimitConfig). */
export interface BoundedRateLimit {
  readonly unlimited: boolean;
  readonly unit?: Unit;
  readonly unitMultiplier: number;
  readonly algorithm: Algorithm;
  readonly requestsPerUnit: number;
  readonly burst: number;
}

/**
 * The sizes within which every algorithm counts exactly: the scripts and the memory backend
 * compute in doubles, exact for whole numbers below 2^53, and a sum of two products below 2^52
 * stays there. sliding_log stores one entry per admitted call (with its hits), so at most
 * requests_per_unit entries per counter: the bound caps each log's size and each script's work.
 */
export const EXACT_PRODUCT_MAX = 2 ** 52;
export const SLIDING_LOG_MAX_REQUESTS_PER_UNIT = 1000;

/**
 * The message for a rule outside those sizes, naming it by its composite path, or undefined.
 * Checked when rules load, so that no request can reach a counter that would count wrongly.
 */
export function exactBoundsProblem(path: string, rateLimit: BoundedRateLimit): string | undefined {
  if (rateLimit.unlimited || rateLimit.unit === undefined) return undefined;
  const windowMs = UNIT_SECONDS[rateLimit.unit] * rateLimit.unitMultiplier * 1000;
  const { algorithm, requestsPerUnit: limit, burst } = rateLimit;
  const name = `rate limit '${excerpt(path)}'`;
  if (windowMs > EXACT_PRODUCT_MAX) {
    return `${name}: window of ${windowMs} ms is over 2^52 ms`;
  }
  if (algorithm === 'sliding_log' && limit > SLIDING_LOG_MAX_REQUESTS_PER_UNIT) {
    return `${name}: sliding_log allows at most ${SLIDING_LOG_MAX_REQUESTS_PER_UNIT} requests_per_unit (one stored entry per admitted call), got ${limit}`;
  }
  if (algorithm === 'sliding_window' && limit * windowMs > EXACT_PRODUCT_MAX) {
    return `${name}: sliding_window needs requests_per_unit × window (${limit} × ${windowMs} ms) at most 2^52 to count exactly`;
  }
  if ((algorithm === 'token_bucket' || algorithm === 'gcra') && Math.max(limit, burst) * windowMs > EXACT_PRODUCT_MAX) {
    return `${name}: ${algorithm} needs burst × window and requests_per_unit × window (${burst}, ${limit} × ${windowMs} ms) at most 2^52 to count exactly`;
  }
  return undefined;
}
