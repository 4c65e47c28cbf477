import type { CounterId } from './limiter';

/** REDIS_KEY_LAYOUT: which keys the Redis backend counts fixed windows in. */
export type KeyLayout = 'floodgate' | 'reference';

/**
 * The Redis key envoyproxy/ratelimit counts a fixed window in (its src/limiter/cache_key.go):
 * `CACHE_KEY_PREFIX + domain + "_" + (key + "_" + value + "_")* + window start (epoch s)`,
 * the window being the limit's unit (`(now / unit) * unit`). `counter.entries` are the request's
 * entries with each share_threshold wildcard's value already replaced by its pattern, as the
 * reference writes them. Nothing is escaped and there is no hash tag: the shared layout must be
 * byte for byte the reference's, which is why it is not injective (`a_b` + `c` and `a` + `b_c`
 * meet) and why, in a Redis Cluster, one request's keys may lie in several slots.
 */
export function referenceKeyStem(prefix: string, counter: CounterId): string {
  let key = prefix + counter.domain + '_';
  for (const entry of counter.entries) key += entry.key + '_' + entry.value + '_';
  return key;
}

/** The window start the reference names its key after: whole seconds, floored to the unit. */
export function referenceWindowStart(unitSeconds: number, nowMs: number): number {
  const now = Math.floor(nowMs / 1000);
  return now - (now % unitSeconds);
}

/** The reference's key for `counter` in the window of `unitSeconds` that holds `nowMs`. */
export function referenceWindowKey(prefix: string, counter: CounterId, unitSeconds: number, nowMs: number): string {
  return referenceKeyStem(prefix, counter) + referenceWindowStart(unitSeconds, nowMs);
}
