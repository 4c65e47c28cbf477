// Drop-in details that users of envoyproxy/ratelimit read from its current code
// (src/service/ratelimit.go: ratelimitToMetadata, descriptorToStruct, the header choice in
// shouldRateLimitWorker; src/limiter/base_limiter.go: shadow_mode stats; the statsd exporter's
// default mapping), as one suite that every backend must pass: memory
// (test/e2e/drop-in-memory.test.ts) and Redis standalone (test/integration/drop-in-redis.test.ts).
// Real gRPC with the project's protos; metadata is compared as the decoded protobuf Struct.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { TestRequest } from './rls-client';
import { struct, type DecodedStruct } from './protobuf-struct';
import { startTestApp, type TestApp } from './test-app';
import { awayFromWindowEdge, msToWindowEnd } from './windows';

const RULES = `
domain: dropin
descriptors:
  - key: a
    metadata:
      team: payments
      limits: { a: 1, shared: { x: 1 } }
      tags: [from_a]
    rate_limit: { unit: hour, requests_per_unit: 100 }
  - key: b
    metadata:
      team: search
      limits: { b: 2, shared: { x: 9, z: 2 } }
      tags: [from_b]
      owner: b
    rate_limit: { unit: hour, requests_per_unit: 100 }
  - key: quota
    quota_mode: true
    metadata: { quota: spent }
    rate_limit: { unit: hour, requests_per_unit: 1 }
  - key: blocked
    metadata: { blocked: true }
    rate_limit: { unit: hour, requests_per_unit: 0 }
  - key: shadow
    shadow_mode: true
    metadata: { shadow: 1 }
    rate_limit: { unit: hour, requests_per_unit: 0 }
  - key: free
    metadata: { free: 1 }
    rate_limit: { unlimited: true }
  - key: minute
    rate_limit: { unit: minute, requests_per_unit: 1 }
  - key: day
    rate_limit: { unit: day, requests_per_unit: 0 }
  - key: s10
    shadow_mode: true
    rate_limit: { unit: second, requests_per_unit: 10 }
  - key: m20
    shadow_mode: true
    rate_limit: { unit: minute, requests_per_unit: 20 }
  - key: l1
    value: x
    descriptors:
      - key: l2
        descriptors:
          - key: l3
            rate_limit: { unit: hour, requests_per_unit: 5 }
`;

/** Metadata of rule `a` alone. */
const A_METADATA = { team: 'payments', limits: { a: 1, shared: { x: 1 } }, tags: ['from_a'] };

type Entries = Record<string, string>;
const desc = (entries: Entries, extra: Omit<TestRequest['descriptors'][number], 'entries'> = {}) => ({
  entries: Object.entries(entries).map(([key, value]) => ({ key, value })),
  ...extra,
});

function headerMap(headers: readonly { key: string; value: string }[]): Record<string, string> {
  return Object.fromEntries(headers.map((h) => [h.key, h.value]));
}

/** One sample of Prometheus text exposition; 0 when the series does not exist yet. */
function sample(text: string, name: string, labels: Record<string, string>): number {
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = (m[2] as string).split(',');
    if (wanted.length === have.length && wanted.every((w) => have.includes(w))) return Number(m[3]);
  }
  return 0;
}

export function dropInSuite(backend: string, env: () => Record<string, string>): void {
  describe(`drop-in details (${backend})`, () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await startTestApp({ 'dropin.yaml': RULES }, { ...env(), RESPONSE_DYNAMIC_METADATA: 'true', LIMIT_RESPONSE_HEADERS_ENABLED: 'true' });
    });
    afterAll(async () => {
      await t?.stop();
    });

    const metadataOf = async (request: TestRequest): Promise<DecodedStruct> => {
      const res = await t.client.shouldRateLimit(request);
      return res.dynamic_metadata as unknown as DecodedStruct;
    };
    const metrics = async (): Promise<string> => (await fetch(`${t.debugUrl}/metrics`)).text();

    describe('dynamic metadata', () => {
      test('two passed rules: nested metadata merged key by key, first rule wins a clash, lists not merged', async () => {
        const request = { domain: 'dropin', descriptors: [desc({ a: 'm1' }), desc({ b: 'm1' })] };
        const expected = struct({
          domain: 'dropin',
          descriptors: [{ entries: ['a=m1'] }, { entries: ['b=m1'] }],
          metadata: { team: 'payments', limits: { a: 1, shared: { x: 1, z: 2 }, b: 2 }, tags: ['from_a'], owner: 'b' },
        });
        expect(await metadataOf(request)).toEqual(expected);
        // The same request again gives the same struct: the merge wrote into nothing it reuses.
        expect(await metadataOf(request)).toEqual(expected);
        // And rule a alone still has only its own metadata.
        expect(await metadataOf({ domain: 'dropin', descriptors: [desc({ a: 'm1' })] })).toEqual(
          struct({ domain: 'dropin', descriptors: [{ entries: ['a=m1'] }], metadata: A_METADATA }),
        );
      });

      test('a quota rule adds its metadata while within its limit, not once over it', async () => {
        const request = { domain: 'dropin', descriptors: [desc({ quota: 'q1' }), desc({ a: 'q1' })] };
        const descriptors = [{ entries: ['quota=q1'] }, { entries: ['a=q1'] }];
        expect(await metadataOf(request)).toEqual(struct({ domain: 'dropin', descriptors, metadata: { quota: 'spent', ...A_METADATA } }));
        expect(await metadataOf(request)).toEqual(struct({ domain: 'dropin', descriptors, metadata: A_METADATA }));
      });

      test('an over-limit rule and an unlimited rule add nothing; a shadow rule over its limit passes and adds its own', async () => {
        expect(await metadataOf({ domain: 'dropin', descriptors: [desc({ blocked: 'o' }), desc({ free: 'o' })] })).toEqual(
          struct({ domain: 'dropin', descriptors: [{ entries: ['blocked=o'] }, { entries: ['free=o'] }] }),
        );
        expect(await metadataOf({ domain: 'dropin', descriptors: [desc({ shadow: 'o' })] })).toEqual(
          struct({ domain: 'dropin', descriptors: [{ entries: ['shadow=o'] }], metadata: { shadow: 1 } }),
        );
      });

      test('hitsAddend at the top level whenever the request carries one, an explicit 1 too', async () => {
        const one = { domain: 'dropin', descriptors: [desc({ nothing: 'h' })] };
        expect(await metadataOf({ ...one, hits_addend: 1 })).toEqual(
          struct({ domain: 'dropin', descriptors: [{ entries: ['nothing=h'] }], hitsAddend: 1 }),
        );
        expect(await metadataOf({ ...one, hits_addend: 3 })).toEqual(
          struct({ domain: 'dropin', descriptors: [{ entries: ['nothing=h'] }], hitsAddend: 3 }),
        );
        expect(await metadataOf({ ...one, hits_addend: 0 })).toEqual(struct({ domain: 'dropin', descriptors: [{ entries: ['nothing=h'] }] }));
        expect(await metadataOf(one)).toEqual(struct({ domain: 'dropin', descriptors: [{ entries: ['nothing=h'] }] }));
      });

      test('a per-descriptor hits_addend appears in its descriptor, 0 included', async () => {
        const request = {
          domain: 'dropin',
          descriptors: [
            desc({ a: 'pd' }, { hits_addend: { value: 3 } }),
            desc({ nothing: 'pd', k2: '' }, { hits_addend: { value: 0 } }),
            desc({ b: 'pd' }),
          ],
        };
        expect(await metadataOf(request)).toEqual(
          struct({
            domain: 'dropin',
            descriptors: [{ entries: ['a=pd'], hitsAddend: 3 }, { entries: ['nothing=pd', 'k2='], hitsAddend: 0 }, { entries: ['b=pd'] }],
            metadata: { team: 'payments', limits: { a: 1, shared: { x: 1, z: 2 }, b: 2 }, tags: ['from_a'], owner: 'b' },
          }),
        );
      });

      test('a limit override appears in protobuf text form; the overridden rule adds no metadata', async () => {
        const request = {
          domain: 'dropin',
          descriptors: [
            desc({ a: 'lo' }, { limit: { requests_per_unit: 5, unit: 'MINUTE' } }),
            desc({ b: 'lo' }, { limit: { requests_per_unit: 0, unit: 'HOUR' } }),
          ],
        };
        expect(await metadataOf(request)).toEqual(
          struct({
            domain: 'dropin',
            descriptors: [
              { entries: ['a=lo'], limit: 'requests_per_unit:5 unit:MINUTE' },
              // proto3 text form leaves out a field at its default (requests_per_unit 0).
              { entries: ['b=lo'], limit: 'unit:HOUR' },
            ],
          }),
        );
      });
    });

    describe('rate-limit headers', () => {
      // The seconds to the day's end as the server saw them, somewhere between the call's start
      // and its answer (a busy machine may take seconds), give or take a rounding second.
      const dayResetBetween =
        (before: number, after: number) =>
        (seconds: number): boolean =>
          seconds >= Math.ceil(msToWindowEnd(86_400, after) / 1000) - 1 && seconds <= Math.ceil(msToWindowEnd(86_400, before) / 1000) + 1;

      test('[1/min over, 0/day over]: the last over-limit status is described', async () => {
        await awayFromWindowEdge(86_400, 120_000);
        await awayFromWindowEdge(60, 5_000);
        await t.client.shouldRateLimit({ domain: 'dropin', descriptors: [desc({ minute: 'h1' })] });
        const before = Date.now();
        const res = await t.client.shouldRateLimit({ domain: 'dropin', descriptors: [desc({ minute: 'h1' }), desc({ day: 'h1' })] });
        const after = Date.now();
        expect(res.statuses.map((s) => s.code)).toEqual(['OVER_LIMIT', 'OVER_LIMIT']);
        const headers = headerMap(res.response_headers_to_add);
        expect(headers['RateLimit-Limit']).toBe('0');
        expect(headers['RateLimit-Remaining']).toBe('0');
        expect(Number(headers['RateLimit-Reset'])).toSatisfy(dayResetBetween(before, after));
        expect(Number(headers['Retry-After'])).toSatisfy(dayResetBetween(before, after));
      });

      test('[0/day over, 1/min over]: the minute is described, Retry-After still waits for the day', async () => {
        await awayFromWindowEdge(86_400, 120_000);
        await awayFromWindowEdge(60, 5_000);
        await t.client.shouldRateLimit({ domain: 'dropin', descriptors: [desc({ minute: 'h2' })] });
        const before = Date.now();
        const res = await t.client.shouldRateLimit({ domain: 'dropin', descriptors: [desc({ day: 'h2' }), desc({ minute: 'h2' })] });
        const after = Date.now();
        const headers = headerMap(res.response_headers_to_add);
        expect(headers['RateLimit-Limit']).toBe('1');
        expect(headers['RateLimit-Remaining']).toBe('0');
        expect(Number(headers['RateLimit-Reset'])).toBeLessThanOrEqual(60);
        expect(Number(headers['Retry-After'])).toSatisfy(dayResetBetween(before, after));
      });

      test('an unlimited descriptor never takes part', async () => {
        const res = await t.client.shouldRateLimit({ domain: 'dropin', descriptors: [desc({ free: 'h3' }), desc({ a: 'h3' })] });
        expect(headerMap(res.response_headers_to_add)).toMatchObject({ 'RateLimit-Limit': '100', 'RateLimit-Remaining': '99' });
      });
    });

    describe('counters', () => {
      const SHADOW = 'ratelimit_service_rate_limit_shadow_mode';

      test('shadow_mode counts the hits over the limit: 11 hits in one call on 10/second is +1', async () => {
        const labels = { domain: 'dropin', key1: 's10', key2: '' };
        const before = sample(await metrics(), SHADOW, labels);
        const res = await t.client.shouldRateLimit({ domain: 'dropin', descriptors: [desc({ s10: 'c1' })], hits_addend: 11 });
        expect(res.overall_code).toBe('OK');
        expect(sample(await metrics(), SHADOW, labels) - before).toBe(1);
      });

      test('shadow_mode: 21 calls on 20/minute is +1', async () => {
        await awayFromWindowEdge(60, 15_000);
        const labels = { domain: 'dropin', key1: 'm20', key2: '' };
        const before = sample(await metrics(), SHADOW, labels);
        for (let i = 0; i < 21; i++) await t.client.shouldRateLimit({ domain: 'dropin', descriptors: [desc({ m20: 'c2' })] });
        expect(sample(await metrics(), SHADOW, labels) - before).toBe(1);
      });

      test('a rule path deeper than two keys: key1 and key2 are its first two levels, deeper ones are dropped', async () => {
        const labels = { domain: 'dropin', key1: 'l1_x', key2: 'l2' };
        const before = sample(await metrics(), 'ratelimit_service_rate_limit_total_hits', labels);
        const res = await t.client.shouldRateLimit({ domain: 'dropin', descriptors: [desc({ l1: 'x', l2: 'any', l3: 'z' })] });
        expect(res.statuses[0]!.current_limit?.requests_per_unit).toBe(5);
        expect(sample(await metrics(), 'ratelimit_service_rate_limit_total_hits', labels) - before).toBe(1);
      });
    });
  });
}
