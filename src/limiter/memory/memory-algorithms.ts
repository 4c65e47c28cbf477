import type { Algorithm } from '../../domain/algorithm';
import { fixedWindow } from './fixed-window';
import { gcra } from './gcra';
import type { MemoryAlgorithm } from './memory-algorithm';
import { slidingLog } from './sliding-log';
import { slidingWindow } from './sliding-window';
import { tokenBucket } from './token-bucket';

/**
 * The in-memory step of every implemented algorithm, by rule name. An algorithm joins
 * IMPLEMENTED_ALGORITHMS only with an entry here and a script in redis/algorithm-scripts.ts.
 */
export const memoryAlgorithms: Readonly<Partial<Record<Algorithm, MemoryAlgorithm>>> = {
  fixed_window: fixedWindow as MemoryAlgorithm,
  sliding_window: slidingWindow as MemoryAlgorithm,
  token_bucket: tokenBucket as MemoryAlgorithm,
  gcra: gcra as MemoryAlgorithm,
  sliding_log: slidingLog as MemoryAlgorithm,
};
