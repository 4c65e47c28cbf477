import type { Code, DescriptorStatus, HeaderPair } from './types';

/** Header names from LIMIT_LIMIT_HEADER / LIMIT_REMAINING_HEADER / LIMIT_RESET_HEADER. */
export interface HeaderNames {
  readonly limit: string;
  readonly remaining: string;
  readonly reset: string;
}

/**
 * RateLimit-* headers from the most restrictive status: the one with a limit and the smallest
 * remaining, an over-limit status winning. On OVER_LIMIT, Retry-After says in whole seconds
 * (at least 1) when the request would be allowed.
 */
export function limitHeaders(names: HeaderNames, statuses: readonly DescriptorStatus[], overall: Code, retryAfterMs: number): HeaderPair[] {
  let chosen: DescriptorStatus | undefined;
  for (const s of statuses) {
    if (s.currentLimit === undefined) continue;
    if (
      chosen === undefined ||
      (s.code === 'OVER_LIMIT' && chosen.code !== 'OVER_LIMIT') ||
      (s.code === chosen.code && s.limitRemaining < chosen.limitRemaining)
    ) {
      chosen = s;
    }
  }
  const headers: HeaderPair[] = [];
  if (chosen?.currentLimit !== undefined) {
    headers.push(
      { key: names.limit, value: String(chosen.currentLimit.requestsPerUnit) },
      { key: names.remaining, value: String(chosen.limitRemaining) },
      { key: names.reset, value: String(chosen.durationUntilResetSeconds) },
    );
  }
  if (overall === 'OVER_LIMIT') headers.push({ key: 'Retry-After', value: String(Math.max(1, Math.ceil(retryAfterMs / 1000))) });
  return headers;
}
