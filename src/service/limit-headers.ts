import type { ResponseHeadersStyle } from '../settings';
import { styledLimitHeaders } from './header-styles';
import type { Code, DescriptorStatus, HeaderPair, RateLimitRequest } from './types';

/** Header names from LIMIT_LIMIT_HEADER / LIMIT_REMAINING_HEADER / LIMIT_RESET_HEADER. */
export interface HeaderNames {
  readonly limit: string;
  readonly remaining: string;
  readonly reset: string;
  /** RESPONSE_HEADERS_STYLE; absent = reference. */
  readonly style?: ResponseHeadersStyle;
}

/**
 * RateLimit-* headers from the most restrictive status: the one with a limit and the smallest
 * remaining, an over-limit status winning. On OVER_LIMIT, Retry-After says in whole seconds
 * (at least 1) when the request would be allowed.
 */
export function limitHeaders(names: HeaderNames, statuses: readonly DescriptorStatus[], overall: Code, retryAfterMs: number, request?: RateLimitRequest): HeaderPair[] {
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
  // The style of the headers is header-styles.ts' job; this function only chooses the status.
  const entries = chosen && request?.descriptors[statuses.indexOf(chosen)]?.entries;
  return styledLimitHeaders(names.style ?? 'reference', names, chosen && { status: chosen, ...(entries ? { domain: (request as RateLimitRequest).domain, entries } : {}) }, overall, retryAfterMs);
}
