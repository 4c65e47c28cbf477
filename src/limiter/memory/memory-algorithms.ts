import type { Algorithm } from '../../domain/algorithm';
import { fixedWindow } from './fixed-window';
import { gcra } from './gcra';
import type { MemoryAlgorithm } from './memory-algorithm';
import { slidingLog } from './sliding-log';
import { slidingWindow } from './sliding-window';
import { tokenBucket } from './token-bucket';

/**
 * The in-memory step of every algorithm, by rule name. The table is total: a new Algorithm
 * does not compile until it has an entry here and a script in redis/algorithm-scripts.ts.
 */
export const memoryAlgorithms: Readonly<Record<Algorithm, MemoryAlgorithm>> = {
  fixed_window: fixedWindow,
  sliding_window: slidingWindow,
  token_bucket: tokenBucket,
  gcra,
  sliding_log: slidingLog,
};
