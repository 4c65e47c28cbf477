// Issue 21 on the memory backend: the shared list suite (test/helpers/limit-list-suite.ts).
import { describe } from 'vitest';
import { MemoryLimiter } from '../../../src/limiter/memory/memory-limiter';
import { limitListSuite } from '../../helpers/limit-list-suite';

let n = 0;
describe('rate_limits lists on memory', () => {
  limitListSuite({ limiter: (now) => new MemoryLimiter({ now }) }, () => `k${++n}`);
});
