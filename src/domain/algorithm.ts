/** Every counting algorithm, in the order the rule-file documentation lists them. */
export const ALGORITHMS = Object.freeze(['fixed_window', 'sliding_window', 'token_bucket', 'gcra', 'sliding_log'] as const);

/** Counting algorithms (rule field `algorithm`, default `fixed_window`). */
export type Algorithm = (typeof ALGORITHMS)[number];

const KNOWN: ReadonlySet<string> = new Set(ALGORITHMS);

/** Narrows a rule file's `algorithm` field; undefined when it names no algorithm. */
export function parseAlgorithm(name: string): Algorithm | undefined {
  return KNOWN.has(name) ? (name as Algorithm) : undefined;
}
