import type { Code, DescriptorStatus, HeaderPair } from './types';

/** Header names from LIMIT_LIMIT_HEADER / LIMIT_REMAINING_HEADER / LIMIT_RESET_HEADER. */
export interface HeaderNames {
  readonly limit: string;
  readonly remaining: string;
  readonly reset: string;
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
 * RateLimit-* headers (limit, remaining, seconds until reset, as plain integers) of the chosen
 * status. Ours in addition: on OVER_LIMIT, Retry-After in whole seconds (at least 1).
 */
export function limitHeaders(names: HeaderNames, input: HeaderInput): HeaderPair[] {
  const chosen = chooseStatus(input.statuses, input.quota);
  const headers: HeaderPair[] = [];
  if (chosen?.currentLimit !== undefined) {
    headers.push(
      { key: names.limit, value: String(chosen.currentLimit.requestsPerUnit) },
      { key: names.remaining, value: String(chosen.limitRemaining) },
      { key: names.reset, value: String(chosen.durationUntilResetSeconds) },
    );
  }
  if (input.overall === 'OVER_LIMIT') headers.push({ key: 'Retry-After', value: String(Math.max(1, Math.ceil(input.retryAfterMs / 1000))) });
  return headers;
}
