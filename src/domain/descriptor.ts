/** One `key`/`value` pair of a rate-limit descriptor, as Envoy sends it and the rule tree matches it. */
export interface DescriptorEntry {
  readonly key: string;
  readonly value: string;
}
