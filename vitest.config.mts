import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Integration suites start real redis-server processes and servers; on a 2-core machine
    // two files at a time keeps timings honest.
    maxWorkers: 2,
    // A test that counts exactly first waits, when the clock is close to a window edge, for the
    // next window (awayFromWindowEdge: up to 2 min for a day window): that wait counts against
    // the timeout, so the bound leaves room for it beside the test's own 30 s.
    testTimeout: 150_000,
    hookTimeout: 60_000,
    pool: 'forks',
  },
});
