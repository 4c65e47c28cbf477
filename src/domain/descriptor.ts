/** One `key`/`value` pair of a rate-limit descriptor, as Envoy sends it and the rule tree matches it. */
export interface DescriptorEntry {
  readonly key: string;
  readonly value: string;
}

/**
 * `key_value`, or `key` alone when the value is empty: how rule files, full keys and metric
 * names write one descriptor entry (the reference's composite key).
 */
export function keyValue(entry: DescriptorEntry): string {
  return entry.value === '' ? entry.key : `${entry.key}_${entry.value}`;
}
