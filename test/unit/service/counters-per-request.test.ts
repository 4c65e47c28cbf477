// Issue 26, finding 3: what one request can make the counter backend do is bounded: the
// counters it needs across all its descriptors and `rate_limits` lists. A request over
// MAX_COUNTERS_PER_REQUEST is refused whole, before anything is counted; the default admits
// what the reference's users send (one counter per descriptor, up to MAX_DESCRIPTORS_PER_REQUEST).
import { status as GrpcStatus } from '@grpc/grpc-js';
import { describe, expect, test } from 'vitest';
import { MAX_LIMITS_PER_LIST } from '../../../src/config/check-rules';
import { compileRules } from '../../../src/config/compile-rules';
import { parseRuleFile } from '../../../src/config/parse-rule-file';
import { grpcStatusOf } from '../../../src/base/error-status';
import { InvalidRequestError } from '../../../src/base/errors';
import type { Limiter, LimitCheck } from '../../../src/limiter/limiter';
import { MemoryLimiter } from '../../../src/limiter/memory/memory-limiter';
import { PrometheusMetrics } from '../../../src/metrics/metrics';
import { RateLimitService } from '../../../src/service/rate-limit-service';
import type { RequestDescriptor } from '../../../src/service/types';
import { DEFAULT_MAX_COUNTERS_PER_REQUEST, type RequestLimits } from '../../../src/service/validate-request';

const units = ['second', 'minute', 'hour', 'day'];
const fullList = Array.from(
  { length: MAX_LIMITS_PER_LIST },
  (_, i) => `      - { unit: ${units[i % 4]}, unit_multiplier: ${Math.floor(i / 4) + 1}, requests_per_unit: 1000 }`,
).join('\n');

const RULES = compileRules(
  [
    parseRuleFile(
      'api.yaml',
      `domain: api
descriptors:
  - key: one
    rate_limit: { unit: minute, requests_per_unit: 1000 }
  - key: list
    rate_limits:
${fullList}
  - key: free
    rate_limit: { unlimited: true }
`,
    ),
  ],
  { mergeDomainConfig: false },
);

const LIMITS: RequestLimits = { maxDescriptors: 64, maxEntries: 4, maxKeyBytes: 64, maxValueBytes: 64 };

function setup(limits: RequestLimits = LIMITS) {
  const checked: number[] = [];
  const memory = new MemoryLimiter({ now: () => Date.UTC(2026, 0, 1) });
  const limiter: Limiter = {
    check: (checks: readonly LimitCheck[], options) => {
      checked.push(checks.length);
      return memory.check(checks, options);
    },
    close: () => memory.close(),
  } as Limiter;
  const service = new RateLimitService({
    rules: () => RULES,
    limiter,
    metrics: new PrometheusMetrics(),
    config: {
      shadowMode: false,
      quotaMode: false,
      stopIncrementWhenOverLimit: false,
      nearLimitRatio: 0.8,
      responseDynamicMetadata: false,
      requestLimits: limits,
    },
  });
  const call = (descriptors: RequestDescriptor[]) => service.shouldRateLimit({ domain: 'api', descriptors, hitsAddend: 1 }, Date.now() + 1000);
  return { call, checked };
}

const many = (key: string, count: number): RequestDescriptor[] =>
  Array.from({ length: count }, (_, i) => ({ entries: [{ key, value: `v${i}` }] }));

describe('counters per request (MAX_COUNTERS_PER_REQUEST)', () => {
  test('the default admits 64 descriptors of one limit each (what a reference user sends) and 16 full lists', async () => {
    expect(DEFAULT_MAX_COUNTERS_PER_REQUEST).toBe(256);
    const { call, checked } = setup();
    expect((await call(many('one', 64))).overallCode).toBe('OK');
    expect((await call(many('list', DEFAULT_MAX_COUNTERS_PER_REQUEST / MAX_LIMITS_PER_LIST))).overallCode).toBe('OK');
    expect(checked).toEqual([64, 256]);
  });

  test('a request that needs more counters is refused whole before anything is counted, INVALID_ARGUMENT', async () => {
    const { call, checked } = setup();
    const err = await call([...many('list', 16), ...many('one', 1)]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidRequestError);
    expect((err as Error).message).toBe('request needs more than 256 counters (MAX_COUNTERS_PER_REQUEST)');
    expect(grpcStatusOf(err)).toBe(GrpcStatus.INVALID_ARGUMENT);
    // 64 descriptors, each a 16-limit list: 1,024 counters; refused as well.
    await expect(call(many('list', 64))).rejects.toThrow('request needs more than 256 counters (MAX_COUNTERS_PER_REQUEST)');
    expect(checked).toEqual([]);
  });

  test('only counted descriptors count: unlimited and unmatched ones need no counter', async () => {
    const { call, checked } = setup({ ...LIMITS, maxCounters: 16 });
    expect((await call([...many('list', 1), ...many('free', 20), ...many('nomatch', 20)])).overallCode).toBe('OK');
    await expect(call([...many('list', 1), ...many('one', 1)])).rejects.toThrow(
      'request needs more than 16 counters (MAX_COUNTERS_PER_REQUEST)',
    );
    expect(checked).toEqual([16]);
  });
});
