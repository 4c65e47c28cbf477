// Resident memory per live counter of the memory backend (issue 20's target: <= 300 B).
// Fills one MemoryLimiter (the built one, dist/) with COUNT live counters of distinct ordinary
// identities (`{api:user=user-<i>}:<algorithm>:3600`), the caps raised above COUNT, and prints
// the growth of RSS and heap over the counters, per counter, as one JSON line.
//   node --expose-gc scripts/memory-counter-size.mjs [count] [algorithm]
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { MemoryLimiter } = require(join(root, 'dist/src/limiter/memory/memory-limiter.js'));

const count = Number(process.argv[2] ?? 1_000_000);
const algorithm = process.argv[3] ?? 'fixed_window';
const gc = globalThis.gc;
if (typeof gc !== 'function') throw new Error('run with node --expose-gc');

function rssBytes() {
  return process.memoryUsage.rss();
}

const now = 1_700_000_000_000;
const limiter = new MemoryLimiter({ now: () => now, sweepIntervalMs: 3_600_000, maxCounters: count * 2, maxBytes: 64 * 1024 ** 3 });
const spec = { algorithm, limit: 1000, windowSeconds: 3600, burst: 1000 };
gc();
gc();
const rssBefore = rssBytes();
const heapBefore = process.memoryUsage().heapUsed;
for (let i = 0; i < count; i++) {
  limiter.checkNow([{ counter: { domain: 'api', entries: [{ key: 'user', value: `user-${i}` }] }, spec, hits: 1 }], false);
}
gc();
gc();
const rssAfter = rssBytes();
const heapAfter = process.memoryUsage().heapUsed;
if (limiter.size !== count) throw new Error(`expected ${count} live counters, got ${limiter.size}`);
const out = {
  algorithm,
  counters: count,
  rssBytesPerCounter: Math.round((rssAfter - rssBefore) / count),
  heapBytesPerCounter: Math.round((heapAfter - heapBefore) / count),
  rssMb: Math.round(rssAfter / 1e6),
};
process.stdout.write(JSON.stringify(out) + '\n');
void limiter.close();
