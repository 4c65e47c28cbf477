import type { RuleHitCounts } from '../metrics/metrics';

/** One descriptor's evaluation, as far as the stat buckets need it. */
export interface HitCountInput {
  /** The rule's requests_per_unit. */
  readonly limit: number;
  /** The counter after this call, as the algorithm reports it. */
  readonly used: number;
  /** Hits this descriptor added (0 = check only). */
  readonly hits: number;
  readonly allowed: boolean;
  readonly nearLimitRatio: number;
  /** The answer came from the local over-limit cache. */
  readonly fromLocalCache: boolean;
  /** The rule is in shadow mode. */
  readonly shadow: boolean;
}

/**
 * Splits one descriptor's hits into the reference's stat buckets. Counts are in hits, so a
 * request that crosses a threshold splits its hits: the part below the near-limit line is
 * "within", the part between it and the limit is also "near", the part above is "over".
 */
export function hitCounts(input: HitCountInput): RuleHitCounts {
  const { limit, used, hits, allowed, nearLimitRatio, fromLocalCache, shadow } = input;
  const counts: RuleHitCounts = { totalHits: hits, withinLimit: 0, nearLimit: 0, overLimit: 0, overLimitWithLocalCache: 0, shadowMode: 0 };
  // float32 arithmetic as in the reference (float32(limit) * float32 ratio), so that thresholds
  // match its dashboards exactly.
  const near = Math.floor(Math.fround(Math.fround(limit) * Math.fround(nearLimitRatio)));
  if (fromLocalCache) {
    counts.overLimit = hits;
    counts.overLimitWithLocalCache = hits;
  } else if (!allowed) {
    const before = used - hits;
    if (used <= limit || before >= limit) {
      // Either the algorithm did not count the refused hits, or all of them were over already.
      counts.overLimit = hits;
    } else {
      counts.overLimit = used - limit;
      counts.nearLimit = limit - Math.max(near, before);
    }
  } else {
    const before = used - hits;
    if (used > near) counts.nearLimit = before >= near ? hits : used - near;
    counts.withinLimit = hits;
  }
  // The reference's increaseShadowModeStats: the hits over the limit, split as over_limit is.
  if (!allowed && shadow) counts.shadowMode = counts.overLimit;
  return counts;
}
