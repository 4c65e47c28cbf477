#!/usr/bin/env node
// Pools the rounds of several `npm run bench -- --compare` runs (their .json files) and prints,
// per scenario and backend, the median over all rounds of the per-round ratios: server CPU per
// call × the bare server's, for each side, and the after side × the before side. On a busy
// machine one run's 5 to 7 rounds leave ±0.2 on a ratio; the pooled median is steadier.
//   node scripts/bench-pool.mjs bench/results/A.json bench/results/B.json ...
import { readFileSync } from 'node:fs';

const runs = process.argv.slice(2).map((f) => JSON.parse(readFileSync(f, 'utf8')));
if (runs.length === 0) throw new Error('usage: bench-pool.mjs <result.json>...');
const median = (xs) => {
  const v = [...xs].sort((a, b) => a - b);
  const m = Math.floor(v.length / 2);
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
};
const scenarios = [...new Set(runs.flatMap((r) => r.settings.scenarios))];
const backends = [...new Set(runs.flatMap((r) => r.settings.backends))];
console.log(`${runs.length} runs, ${runs.reduce((n, r) => n + r.settings.rounds, 0)} rounds`);
console.log('| scenario | backend | rounds | before × bare | after × bare | after × before |');
console.log('|---|---|---|---|---|---|');
for (const scenario of scenarios) {
  for (const backend of backends) {
    const before = [];
    const after = [];
    const vs = [];
    for (const r of runs) {
      for (let round = 1; round <= r.settings.rounds; round++) {
        const get = (target) => r.samples.find((s) => s.scenario === scenario && s.round === round && s.target === target)?.cpuUs;
        const bare = get('bare');
        const b = get(`before/${backend}`);
        const a = get(`after/${backend}`);
        if (bare === undefined || b === undefined || a === undefined) continue;
        before.push(b / bare);
        after.push(a / bare);
        vs.push(a / b);
      }
    }
    if (vs.length === 0) continue;
    console.log(
      `| ${scenario} | ${backend} | ${vs.length} | ${median(before).toFixed(2)} | ${median(after).toFixed(2)} | ${median(vs).toFixed(2)} |`,
    );
  }
}
