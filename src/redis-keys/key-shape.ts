import type { Algorithm } from '../domain/algorithm';

/** The Redis type each algorithm's script stores its counter in. */
const TYPE_OF: Readonly<Record<Algorithm, string>> = {
  fixed_window: 'string',
  gcra: 'string',
  sliding_window: 'hash',
  token_bucket: 'hash',
  sliding_log: 'zset',
};

/** What a counter key written by floodgate says about itself. */
export interface CounterKeyShape {
  readonly algorithm: Algorithm;
  readonly windowSeconds: number;
}

// `<prefix>rl:{<tag>}:<algorithm>:<windowSeconds>` (see limiter/counter-key.ts); the tag holds no
// braces because counter-key escapes them.
const SHAPE = /^rl:\{[^{}]*\}:(fixed_window|gcra|sliding_window|token_bucket|sliding_log):([1-9]\d{0,9})$/;

/** The pattern SCAN matches for every key floodgate may write under `prefix`. */
export function counterKeyPattern(prefix: string): string {
  return prefix.replace(/[*?[\]\\]/g, '\\$&') + 'rl:*';
}

/**
 * The shape of `key` when it is one floodgate writes under `prefix` and holds the Redis type
 * its algorithm uses; undefined otherwise ("unknown shape").
 */
export function counterKeyShape(prefix: string, key: string, redisType: string): CounterKeyShape | undefined {
  if (!key.startsWith(prefix)) return undefined;
  const m = SHAPE.exec(key.slice(prefix.length));
  if (m === null) return undefined;
  const algorithm = m[1] as Algorithm;
  if (TYPE_OF[algorithm] !== redisType) return undefined;
  return { algorithm, windowSeconds: Number(m[2]) };
}

/**
 * The TTL `--fix` gives a counter without one: two of its windows cover every algorithm's
 * state (sliding_window reads the previous window), after which the counter starts afresh.
 */
export function repairTtlSeconds(shape: CounterKeyShape): number {
  return shape.windowSeconds * 2;
}
