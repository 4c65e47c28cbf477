// Bytes that are not a RateLimitRequest answer INVALID_ARGUMENT, like any other invalid
// request, and the server keeps serving. Sent with a raw client that puts the bytes on the
// wire unchanged.
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/test-app';

const RULES = {
  'edge.yaml': 'domain: edge\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: minute\n      requests_per_unit: 100\n',
  'users.yaml': 'domain: users\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: minute\n      requests_per_unit: 1\n',
};

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
    // Field number 2^32 + 10 with wire type 2: its low 32 bits would read as the domain field.
    ['a field number past 2^29 - 1', Buffer.concat([DOMAIN, Buffer.from([0xd2, 0x80, 0x80, 0x80, 0x80, 0x02, 0x01, 0x78])])],
    ['a 10-byte varint past 64 bits', Buffer.concat([DOMAIN, Buffer.from([0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02])])],
  ];

  it.each(cases)('%s answers INVALID_ARGUMENT and the server keeps serving', async (_name, bytes) => {
    const answer = await send(bytes);
    expect(answer.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(answer.details).toMatch(/malformed RateLimitRequest/);
    const ok = await t.client.shouldRateLimit({ domain: 'edge', descriptors: [{ entries: [{ key: 'k', value: 'v' }] }] });
    expect(ok.overall_code).toBe('OK');
  });

  // Latin-1 header bytes that Envoy passes through: J\xF6rg and J\xFCrg are two clients. Read
  // with replacement characters both were J\uFFFDrg, one counter (OK, then OVER_LIMIT). The
  // reference refuses both (INTERNAL "string field contains invalid UTF-8" on gRPC, 400 on
  // /json); floodgate answers INVALID_ARGUMENT and 400.
  const userRequest = (value: number[]): Buffer => {
    const entry = [0x0a, 0x04, ...Buffer.from('user'), 0x12, value.length, ...value];
    const descriptor = [0x0a, entry.length, ...entry];
    return Buffer.from([0x0a, 0x05, ...Buffer.from('users'), 0x12, descriptor.length, ...descriptor]);
  };
  const JOERG = [0x4a, 0xf6, 0x72, 0x67];
  const JUERG = [0x4a, 0xfc, 0x72, 0x67];

  it('refuses invalid UTF-8 in a descriptor value with INVALID_ARGUMENT, so two clients never share a counter', async () => {
    for (const value of [JOERG, JUERG]) {
      const answer = await send(userRequest(value));
      expect(answer.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(answer.details).toMatch(/invalid UTF-8/);
    }
    // Valid UTF-8 for the same names: two clients, each with its own counter.
    for (const value of ['Jörg', 'Jürg']) {
      expect(await send(userRequest([...Buffer.from(value, 'utf8')]))).toEqual({ code: grpc.status.OK, details: '' });
    }
  });

  it('refuses a /json body with invalid UTF-8 with 400', async () => {
    const post = async (value: number[]): Promise<number> => {
      const body = Buffer.concat([
        Buffer.from('{"domain":"users","descriptors":[{"entries":[{"key":"user","value":"x'),
        Buffer.from(value),
        Buffer.from('"}]}]}'),
      ]);
      const response = await fetch(`${t.httpUrl}/json`, { method: 'POST', body, signal: AbortSignal.timeout(5000) });
      await response.arrayBuffer();
      return response.status;
    };
    expect([await post(JOERG), await post(JUERG)]).toEqual([400, 400]);
    expect([await post([...Buffer.from('Jörg')]), await post([...Buffer.from('Jürg')])]).toEqual([200, 200]);
  });
});
