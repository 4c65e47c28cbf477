import { createHash } from 'node:crypto';
import type { DescriptorEntry } from '../domain/descriptor';
import { UNIT_SECONDS } from '../domain/units';
import type { CurrentLimit, DescriptorStatus, HeaderPair } from './types';

/** RESPONSE_HEADERS_STYLE: which rate-limit headers LIMIT_RESPONSE_HEADERS_ENABLED sends. */
export type ResponseHeadersStyle = 'reference' | 'ietf' | 'x-ratelimit';

/** Header names of the `reference` style (LIMIT_LIMIT_HEADER / ..._REMAINING_ / ..._RESET_). */
export interface ReferenceHeaderNames {
  readonly limit: string;
  readonly remaining: string;
  readonly reset: string;
}

/** The status the headers describe, and who it counts (for the IETF partition key). */
export interface ChosenLimit {
  readonly status: DescriptorStatus;
  readonly domain?: string;
  readonly entries?: readonly DescriptorEntry[];
  /** A `rate_limits` list: every limit's status, for the ietf `RateLimit-Policy` (one item each). */
  readonly policies?: readonly DescriptorStatus[];
}

/**
 * The rate-limit response headers in one RESPONSE_HEADERS_STYLE, for the status already
 * chosen, plus Retry-After (whole seconds, at least 1) on OVER_LIMIT in every style.
 *
 * - reference: `RateLimit-Limit`, `-Remaining`, `-Reset` (names configurable), as envoyproxy/ratelimit.
 * - ietf: `RateLimit-Policy` and `RateLimit` structured fields (draft-ietf-httpapi-ratelimit-headers):
 *   `"<policy>";q=<limit>;qu="requests";w=<window s>;pk=:<partition>:` and
 *   `"<policy>";r=<remaining>;t=<reset s>;pk=:<partition>:`.
 * - x-ratelimit: `X-RateLimit-Limit`, `-Remaining`, `-Reset` (seconds until reset).
 */
export function styledLimitHeaders(
  style: ResponseHeadersStyle,
  names: ReferenceHeaderNames,
  chosen: ChosenLimit | undefined,
  overall: string,
  retryAfterMs: number,
): HeaderPair[] {
  const headers: HeaderPair[] = [];
  const status = chosen?.status;
  const limit = status?.currentLimit;
  if (status !== undefined && limit !== undefined) {
    const perUnit = String(limit.requestsPerUnit);
    const remaining = String(status.limitRemaining);
    const reset = String(status.durationUntilResetSeconds);
    if (style === 'reference') {
      headers.push({ key: names.limit, value: perUnit }, { key: names.remaining, value: remaining }, { key: names.reset, value: reset });
    } else if (style === 'x-ratelimit') {
      headers.push(
        { key: 'X-RateLimit-Limit', value: perUnit },
        { key: 'X-RateLimit-Remaining', value: remaining },
        { key: 'X-RateLimit-Reset', value: reset },
      );
    } else {
      const policy = sfString(policyName(limit.name, limit.requestsPerUnit, limit.unit));
      const pk = chosen?.domain !== undefined && chosen.entries !== undefined ? `;pk=:${partitionKey(chosen.domain, chosen.entries)}:` : '';
      const items = (chosen?.policies ?? [status]).flatMap((s) => (s.currentLimit === undefined ? [] : [policyItem(s.currentLimit, pk)]));
      headers.push(
        { key: 'RateLimit-Policy', value: items.join(', ') },
        { key: 'RateLimit', value: `${policy};r=${remaining};t=${reset}${pk}` },
      );
    }
  }
  if (overall === 'OVER_LIMIT') headers.push({ key: 'Retry-After', value: String(Math.max(1, Math.ceil(retryAfterMs / 1000))) });
  return headers;
}

/** One `RateLimit-Policy` item. w is the unit's length: the status Envoy gets names the unit, not unit_multiplier. */
function policyItem(limit: CurrentLimit, pk: string): string {
  const policy = sfString(policyName(limit.name, limit.requestsPerUnit, limit.unit));
  return `${policy};q=${limit.requestsPerUnit};qu="requests";w=${UNIT_SECONDS[limit.unit]}${pk}`;
}

// sf-string allows printable ASCII only.
const PRINTABLE_ASCII = /^[\x20-\x7e]+$/;

/** The rule's name, or `<n>-per-<unit>` when it has none (or one a structured field cannot carry). */
function policyName(name: string | undefined, requestsPerUnit: number, unit: string): string {
  return name !== undefined && PRINTABLE_ASCII.test(name) ? name : `${requestsPerUnit}-per-${unit.toLowerCase()}`;
}

function sfString(text: string): string {
  return '"' + text.replace(/[\\"]/g, '\\$&') + '"';
}

/**
 * An opaque partition key: 12 bytes of SHA-256 over the domain and the descriptor's entries, so
 * a client can tell its partitions apart without the service echoing request values.
 */
function partitionKey(domain: string, entries: readonly DescriptorEntry[]): string {
  const hash = createHash('sha256').update(domain);
  for (const e of entries) hash.update('\n').update(e.key).update('=').update(e.value);
  return hash.digest().subarray(0, 12).toString('base64');
}
