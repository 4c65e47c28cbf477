import { defineConfig } from 'vitest/config';

// `npm run abuse`: the full attack suite, one attack at a time (each spawns its own server).
export default defineConfig({
  test: {
    include: ['test/abuse/**/*.abuse.ts'],
    maxWorkers: 1,
    testTimeout: 480_000,
    hookTimeout: 60_000,
    pool: 'forks',
  },
});
