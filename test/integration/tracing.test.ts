import * as grpc from '@grpc/grpc-js';
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import type { WireResponse } from '../../src/rls/wire-types';
import { startStandalone, type RedisProcess } from '../harness/redis-servers';
import { oneDescriptor, rlsStub, type TestRequest } from '../helpers/rls-client';
import { startTestApp, type TestApp } from '../helpers/test-app';

// TRACING_ENABLED with the SDK's in-memory exporter: the spans a real call makes.

const RULES = `
domain: traced
descriptors:
  - key: k
    rate_limit: { unit: hour, requests_per_unit: 2 }
  - key: other
    rate_limit: { unit: hour, requests_per_unit: 100 }
`;

const TRACE_ID = '0af7651916cd43dd8448eb211c80319c';
const PARENT_SPAN_ID = 'b7ad6b7169203331';

function callWithMetadata(address: string, request: TestRequest, headers: Record<string, string>): Promise<WireResponse> {
  const client = rlsStub(address, grpc.credentials.createInsecure());
  const metadata = new grpc.Metadata();
  for (const [key, value] of Object.entries(headers)) metadata.set(key, value);
  return new Promise<WireResponse>((resolve, reject) => {
    client.ShouldRateLimit(request, metadata, { deadline: Date.now() + 5000 }, (err: grpc.ServiceError | null, res: WireResponse) => {
      client.close();
      if (err) reject(err);
      else resolve(res);
    });
  });
}

const named = (spans: ReadableSpan[], name: string): ReadableSpan[] => spans.filter((s) => s.name === name);

let redis: RedisProcess;
beforeAll(async () => {
  redis = await startStandalone();
}, 60_000);
afterAll(async () => {
  await redis?.stop();
});

describe('TRACING_ENABLED=true (Redis backend, in-memory exporter)', () => {
  const exporter = new InMemorySpanExporter();
  let t: TestApp;
  let address: string;

  beforeAll(async () => {
    t = await startTestApp(
      { 'traced.yaml': RULES },
      {
        REDIS_URL: redis.url,
        CACHE_KEY_PREFIX: 'tracing_',
        TRACING_ENABLED: 'true',
        TRACING_SERVICE_NAME: 'rls-under-test',
        TRACING_SERVICE_NAMESPACE: 'edge',
        TRACING_SERVICE_INSTANCE_ID: 'rls-0',
      },
      { spanExporter: exporter },
    );
    address = `127.0.0.1:${t.app.grpcPort}`;
  });
  afterAll(async () => {
    await t?.stop();
  });
  beforeEach(() => exporter.reset());

  test('one span per ShouldRateLimit with the domain, the descriptor count and the decision; a child span per script call', async () => {
    const request: TestRequest = {
      domain: 'traced',
      descriptors: [{ entries: [{ key: 'k', value: 'a' }] }, { entries: [{ key: 'other', value: 'b' }] }],
    };
    expect((await t.client.shouldRateLimit(request)).overall_code).toBe('OK');
    const spans = exporter.getFinishedSpans();
    const [call] = named(spans, 'ShouldRateLimit Execution');
    expect(named(spans, 'ShouldRateLimit Execution')).toHaveLength(1);
    expect(call!.attributes).toEqual({ domain: 'traced', descriptor_count: 2, decision: 'OK' });
    expect(call!.parentSpanContext).toBeUndefined();
    const scripts = named(spans, 'Redis Script Execution');
    // Both descriptors share one slot (no cluster) and one algorithm: one atomic script call.
    expect(scripts).toHaveLength(1);
    expect(scripts[0]!.parentSpanContext?.spanId).toBe(call!.spanContext().spanId);
    expect(scripts[0]!.spanContext().traceId).toBe(call!.spanContext().traceId);
    expect(scripts[0]!.attributes).toMatchObject({ 'db.system': 'redis', script: 'fixed_window', keys: 2 });
  });

  test('concurrent calls merged into one script call: that call is traced once, under one of them', async () => {
    await Promise.all(Array.from({ length: 10 }, (_, i) => t.client.shouldRateLimit(oneDescriptor('traced', { other: `merged-${i}` }))));
    const spans = exporter.getFinishedSpans();
    const calls = named(spans, 'ShouldRateLimit Execution');
    const scripts = named(spans, 'Redis Script Execution');
    expect(calls).toHaveLength(10);
    expect(scripts.length).toBeGreaterThan(0);
    expect(scripts.length).toBeLessThanOrEqual(10);
    const callIds = new Set(calls.map((c) => c.spanContext().spanId));
    for (const script of scripts) expect(callIds.has(script.parentSpanContext?.spanId ?? '')).toBe(true);
  });

  test('the decision OVER_LIMIT is on the span', async () => {
    for (let i = 0; i < 3; i++) await t.client.shouldRateLimit(oneDescriptor('traced', { k: 'over' }));
    const calls = named(exporter.getFinishedSpans(), 'ShouldRateLimit Execution');
    expect(calls.map((s) => s.attributes.decision)).toEqual(['OK', 'OK', 'OVER_LIMIT']);
  });

  test('the resource carries the service name, namespace and instance id', async () => {
    await t.client.shouldRateLimit(oneDescriptor('traced', { other: 'r' }));
    const [span] = exporter.getFinishedSpans();
    expect(span!.resource.attributes).toMatchObject({
      'service.name': 'rls-under-test',
      'service.namespace': 'edge',
      'service.instance.id': 'rls-0',
    });
  });

  test("W3C traceparent in the gRPC metadata: the span joins the caller's trace", async () => {
    await callWithMetadata(address, oneDescriptor('traced', { other: 'w3c' }), { traceparent: `00-${TRACE_ID}-${PARENT_SPAN_ID}-01` });
    const [call] = named(exporter.getFinishedSpans(), 'ShouldRateLimit Execution');
    expect(call!.spanContext().traceId).toBe(TRACE_ID);
    expect(call!.parentSpanContext?.spanId).toBe(PARENT_SPAN_ID);
  });

  test("B3, multi-header and single-header forms: the span joins the caller's trace", async () => {
    await callWithMetadata(address, oneDescriptor('traced', { other: 'b3m' }), {
      'x-b3-traceid': TRACE_ID,
      'x-b3-spanid': PARENT_SPAN_ID,
      'x-b3-sampled': '1',
    });
    await callWithMetadata(address, oneDescriptor('traced', { other: 'b3s' }), { b3: `${TRACE_ID}-${PARENT_SPAN_ID}-1` });
    const calls = named(exporter.getFinishedSpans(), 'ShouldRateLimit Execution');
    expect(calls).toHaveLength(2);
    for (const call of calls) {
      expect(call.spanContext().traceId).toBe(TRACE_ID);
      expect(call.parentSpanContext?.spanId).toBe(PARENT_SPAN_ID);
    }
  });

  test('/json: the HTTP headers carry the context too', async () => {
    const res = await fetch(`${t.httpUrl}/json`, {
      method: 'POST',
      headers: { traceparent: `00-${TRACE_ID}-${PARENT_SPAN_ID}-01` },
      body: JSON.stringify({ domain: 'traced', descriptors: [{ entries: [{ key: 'other', value: 'json' }] }] }),
    });
    expect(res.status).toBe(200);
    const [call] = named(exporter.getFinishedSpans(), 'ShouldRateLimit Execution');
    expect(call!.spanContext().traceId).toBe(TRACE_ID);
  });
});

describe('TRACING_SAMPLING_RATE=0: parent-based, as in the reference', () => {
  const exporter = new InMemorySpanExporter();
  let t: TestApp;

  beforeAll(async () => {
    t = await startTestApp(
      { 'traced.yaml': RULES },
      { REDIS_URL: redis.url, CACHE_KEY_PREFIX: 'tracing0_', TRACING_ENABLED: 'true', TRACING_SAMPLING_RATE: '0' },
      { spanExporter: exporter },
    );
  });
  afterAll(async () => {
    await t?.stop();
  });

  test('a root call is not sampled; a call whose caller sampled it is', async () => {
    for (let i = 0; i < 20; i++) await t.client.shouldRateLimit(oneDescriptor('traced', { other: `root-${i}` }));
    expect(exporter.getFinishedSpans()).toEqual([]);
    await callWithMetadata(`127.0.0.1:${t.app.grpcPort}`, oneDescriptor('traced', { other: 'sampled' }), {
      traceparent: `00-${TRACE_ID}-${PARENT_SPAN_ID}-01`,
    });
    const spans = exporter.getFinishedSpans();
    expect(named(spans, 'ShouldRateLimit Execution')).toHaveLength(1);
    expect(named(spans, 'Redis Script Execution')).toHaveLength(1);
    const resource = spans[0]!.resource.attributes;
    // Defaults: the reference's service name and a random instance id.
    expect(resource['service.name']).toBe('RateLimit');
    expect(resource['service.instance.id']).toMatch(/^[0-9a-f-]{36}$/);
  });
});
