import { boundedLabel, MAX_LABEL_LENGTH } from './bounded-label';

// The reference's utils.SanitizeStatName: `:` and `|` become `_`, and so do the dots of anything
// shaped like an IPv4 address. Ours also makes every control character `_`: the reference keeps
// them, and a `\n` in a request value then starts a statsd line of the caller's choosing.
const IPV4 = /\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}/g;
// eslint-disable-next-line no-control-regex
const SEPARATORS = /[:|\u0000-\u001f\u007f]/g;
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/g;

/** A stat name (or a part of one) made safe for a statsd line, as the reference names its stats. */
export function sanitizeStatName(s: string): string {
  return s.replace(SEPARATORS, '_').replace(IPV4, (ip) => ip.replace(/\./g, '_'));
}

/** A tag value as gostats writes it (`.`, `:` and `|` become `_`), control characters too. */
export function sanitizeTagValue(s: string): string {
  return s.replace(/[.:|]/g, '_').replace(CONTROL, '_');
}

/** A tag name: control characters become `_` (gostats leaves names as they are). */
export function sanitizeTagName(s: string): string {
  return s.replace(CONTROL, '_');
}

// The levels of a rule path a statsd_exporter mapping reads as labels (the reference's default
// mapping: domain, key1, key2); deeper levels are one more bounded level.
const LABELLED_LEVELS = 3;

/**
 * A rule's stat path (`domain.key1_value1.key2_value2...`), sanitized, with each of its first
 * three levels bounded as a Prometheus label is (boundedLabel) and every deeper level bounded as
 * one: a path of request values (detailed_metric) stays a few hundred characters, two different
 * paths stay different, and a mapping reads the same domain, key1 and key2 as floodgate's own
 * Prometheus labels.
 */
export function boundedStatPath(path: string): string {
  const clean = sanitizeStatName(path);
  if (clean.length <= MAX_LABEL_LENGTH) return clean;
  const levels = clean.split('.');
  const head = levels.slice(0, LABELLED_LEVELS).map(boundedLabel);
  if (levels.length > LABELLED_LEVELS) head.push(boundedLabel(levels.slice(LABELLED_LEVELS).join('.')));
  return head.join('.');
}
