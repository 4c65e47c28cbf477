// Bytes that are not a RateLimitRequest answer INVALID_ARGUMENT, like any other invalid
// request, and the server keeps serving. Sent with a raw client that puts the bytes on the
// wire unchanged.
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/test-app';

const RULES = { 'edge.yaml': 'domain: edge\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: minute\n      requests_per_unit: 5\n' };

const RawClient = grpc.makeGenericClientConstructor(
  {
    ShouldRateLimit: {
      path: '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit',
      requestStream: false,
      responseStream: false,
      requestSerialize: (b: Buffer) => b,
      requestDeserialize: (b: Buffer) => b,
      responseSerialize: (b: Buffer) => b,
      responseDeserialize: (b: Buffer) => b,
    },
  },
  'RawRls',
);

describe('malformed RateLimitRequest bytes', () => {
  let t: TestApp;
  let raw: grpc.Client;

  beforeAll(async () => {
    t = await startTestApp(RULES);
    raw = new RawClient(`127.0.0.1:${t.app.grpcPort}`, grpc.credentials.createInsecure());
  });
  afterAll(async () => {
    raw.close();
    await t.stop();
  });

  function send(bytes: Buffer): Promise<{ code: grpc.status; details: string }> {
    return new Promise((resolve) => {
      raw.makeUnaryRequest(
        '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit',
        (b: Buffer) => b,
        (b: Buffer) => b,
        bytes,
        { deadline: Date.now() + 5000 },
        (err: grpc.ServiceError | null) => resolve({ code: err ? err.code : grpc.status.OK, details: err?.details ?? '' }),
      );
    });
  }

  // domain "edge", then a descriptor whose length runs past the end of the message.
  const DOMAIN = Buffer.from([0x0a, 0x04, ...Buffer.from('edge')]);
  const cases: [string, Buffer][] = [
    ['a truncated varint', Buffer.concat([DOMAIN, Buffer.from([0x18, 0xff])])],
    ['a length past the end', Buffer.concat([DOMAIN, Buffer.from([0x12, 0x40, 0x0a, 0x00])])],
    ['an invalid wire type', Buffer.concat([DOMAIN, Buffer.from([0x0f, 0x01])])],
    ['a field running past its sub-message', Buffer.concat([DOMAIN, Buffer.from([0x12, 0x02, 0x0a, 0x05, 0x0a, 0x01, 0x6b, 0x12, 0x00])])],
  ];

  it.each(cases)('%s answers INVALID_ARGUMENT and the server keeps serving', async (_name, bytes) => {
    const answer = await send(bytes);
    expect(answer.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(answer.details).toMatch(/malformed RateLimitRequest/);
    const ok = await t.client.shouldRateLimit({ domain: 'edge', descriptors: [{ entries: [{ key: 'k', value: 'v' }] }] });
    expect(ok.overall_code).toBe('OK');
  });
});
