import { createHash } from 'node:crypto';

/** Longest label value kept as it is; rule keys from files are far shorter. */
export const MAX_LABEL_LENGTH = 128;
const KEPT_PREFIX = 64;

/**
 * A label value of bounded length. A longer one (a 4 KiB request value under detailed_metric)
 * keeps its first 64 characters, readable, followed by `~` and a digest of the whole value, so
 * two long values stay two series.
 */
export function boundedLabel(value: string): string {
  if (value.length <= MAX_LABEL_LENGTH) return value;
  return value.slice(0, KEPT_PREFIX) + '~' + createHash('sha256').update(value).digest('base64url').slice(0, 22);
}
