import { styledLimitHeaders, type ResponseHeadersStyle } from './header-styles';
import type { Code, DescriptorStatus, HeaderPair, RateLimitRequest } from './types';

/** Header names from LIMIT_LIMIT_HEADER / LIMIT_REMAINING_HEADER / LIMIT_RESET_HEADER. */
export interface HeaderNames {
  readonly limit: string;
  readonly remaining: string;
  readonly reset: string;
  /** RESPONSE_HEADERS_STYLE; absent = reference. */
  readonly style?: ResponseHeadersStyle;
}

/** One response's statuses and what the headers need to know about them. */
export interface HeaderInput {
  /** In request order. */
  readonly statuses: readonly DescriptorStatus[];
  /** Per status: its rule is in quota mode (rule `quota_mode` or QUOTA_MODE). */
  readonly quota: readonly boolean[];
  readonly overall: Code;
  /** Time until the whole request would be allowed; used only when `overall` is OVER_LIMIT. */
  readonly retryAfterMs: number;
  /** The request, so the ietf style can derive the chosen descriptor's partition key. */
  readonly request?: RateLimitRequest;
  /** Per status of a `rate_limits` list: each of its limits' statuses (the ietf policy lists them all). */
  readonly lists?: readonly (readonly DescriptorStatus[] | undefined)[];
}

const MAX_UINT32 = 4294967295;

/**
 * The status the headers describe, chosen as the reference's shouldRateLimitWorker does: in
 * request order, a status with a limit and a smaller remaining than any before it; but every
 * non-quota OVER_LIMIT status takes over as it is met, so the last one wins. Statuses without a
 * limit (no rule, unlimited) never take part.
 */
function chooseStatus(statuses: readonly DescriptorStatus[], quota: readonly boolean[]): DescriptorStatus | undefined {
  let chosen: DescriptorStatus | undefined;
  let minRemaining = MAX_UINT32;
  for (let i = 0; i < statuses.length; i++) {
    const s = statuses[i] as DescriptorStatus;
    if (s.currentLimit === undefined) continue;
    if (s.limitRemaining < minRemaining) {
      chosen = s;
      minRemaining = s.limitRemaining;
    }
    if (s.code === 'OVER_LIMIT' && quota[i] !== true) {
      chosen = s;
      minRemaining = 0;
    }
  }
  return chosen;
}

/**
 * The rate-limit headers of the chosen status in the configured RESPONSE_HEADERS_STYLE
 * (header-styles.ts formats them). On OVER_LIMIT, Retry-After in whole seconds (at least 1), ours.
 */
export function limitHeaders(names: HeaderNames, input: HeaderInput): HeaderPair[] {
  const chosen = chooseStatus(input.statuses, input.quota);
  const request = input.request;
  const index = chosen === undefined ? -1 : input.statuses.indexOf(chosen);
  const entries = chosen && request?.descriptors[index]?.entries;
  const policies = input.lists?.[index];
  const described = chosen && {
    status: chosen,
    ...(request !== undefined && entries !== undefined ? { domain: request.domain, entries } : {}),
    ...(policies !== undefined && { policies }),
  };
  return styledLimitHeaders(names.style ?? 'reference', names, described, input.overall, input.retryAfterMs);
}
