// The README's worked example of `rate_limits` (Rules, "Several limits on one descriptor"): its
// rules and its table are read from the README and replayed, row by row, through the real
// service on the memory backend with a pinned clock.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { compileRules } from '../../../src/config/compile-rules';
import { parseRuleFile } from '../../../src/config/parse-rule-file';
import { MemoryLimiter } from '../../../src/limiter/memory/memory-limiter';
import { PrometheusMetrics } from '../../../src/metrics/metrics';
import { projectRoot } from '../../../src/base/paths';
import { RateLimitService } from '../../../src/service/rate-limit-service';

const README = readFileSync(join(projectRoot, 'README.md'), 'utf8');
const START = Date.UTC(2030, 0, 1); // the start of an hour

function example(): { yaml: string; rows: string[][] } {
  const section = /<!-- rate-limits-example -->\n([\s\S]*?)<!-- \/rate-limits-example -->/.exec(README)?.[1];
  if (section === undefined) throw new Error('README: no rate-limits-example section');
  const yaml = /```yaml\n([\s\S]*?)```/.exec(section)?.[1] ?? '';
  const rows = section
    .split('\n')
    .filter((l) => /^\| [0-9]/.test(l))
    .map((l) =>
      l
        .split('|')
        .slice(1, -1)
        .map((c) => c.trim()),
    );
  return { yaml, rows };
}

test('the README worked example of rate_limits', async () => {
  const { yaml, rows } = example();
  expect(rows.length).toBe(5);
  const clock = { now: START };
  const rules = compileRules([parseRuleFile('api.yaml', yaml)], { mergeDomainConfig: false });
  const limiter = new MemoryLimiter({ now: () => clock.now });
  const service = new RateLimitService({
    rules: () => rules,
    limiter,
    metrics: new PrometheusMetrics(),
    config: {
      shadowMode: false,
      quotaMode: false,
      stopIncrementWhenOverLimit: false,
      nearLimitRatio: 0.8,
      responseDynamicMetadata: false,
      headers: { limit: 'RateLimit-Limit', remaining: 'RateLimit-Remaining', reset: 'RateLimit-Reset' },
      requestLimits: { maxDescriptors: 8, maxEntries: 4, maxKeyBytes: 64, maxValueBytes: 64 },
    },
  });
  const counter = { domain: 'api', entries: [{ key: 'api_key', value: 'k' }] };
  const count = async (windowSeconds: number, limit: number) =>
    String(
      (
        await limiter.check([{ counter, spec: { algorithm: 'fixed_window', limit, windowSeconds, burst: limit }, hits: 0 }], {
          deadline: Date.now() + 1000,
          stopIncrementWhenOverLimit: false,
        })
      )[0]?.used,
    );
  for (const row of rows) {
    clock.now = START + Math.round(Number(row[0]) * 1000);
    const res = await service.shouldRateLimit({ domain: 'api', descriptors: [{ entries: counter.entries }], hitsAddend: 1 }, Date.now() + 1000);
    const status = res.statuses[0];
    const got = [
      row[0],
      res.overallCode,
      status?.currentLimit?.name,
      String(status?.limitRemaining),
      String(status?.durationUntilResetSeconds),
      res.responseHeadersToAdd.find((h) => h.key === 'Retry-After')?.value ?? '',
      await count(1, 2),
      await count(3600, 3),
    ];
    expect(got, `row t=${row[0]}`).toEqual(row);
  }
  await limiter.close();
});
