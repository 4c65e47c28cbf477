// Issue 29: GRPC_RLS_HANDLER=http2 serves ShouldRateLimit straight on node:http2. A client must
// not tell the two apart: the same frames, sent to a GrpcServer of each kind in the same run,
// get the same answer (HTTP status, content-type, grpc-status, grpc-message, message bytes), and
// grpc.health.v1 stays grpc-js' on the http2 one.
import http2, { type ClientHttp2Session } from 'node:http2';
import { gzipSync, deflateSync } from 'node:zlib';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidRequestError } from '../../src/base/errors';
import { HealthState } from '../../src/base/health';
import { createLogger } from '../../src/base/log';
import { GrpcServer, type RlsHandlerKind } from '../../src/grpc/grpc-server';
import { RLS_PATH } from '../../src/grpc/rls-stream-handler';
import { PrometheusMetrics } from '../../src/metrics/metrics';
import type { RateLimitHandler } from '../../src/service/rate-limit-handler';
import type { RateLimitRequest, RateLimitResponse } from '../../src/service/types';
import { loadSettings } from '../../src/settings/settings';
import { grpcFrame as frame, rawGrpcCall, type RawAnswer, type RawSend } from '../helpers/raw-grpc-call';
import { oneDescriptor, rlsClient } from '../helpers/rls-client';

function domainRequest(domain: string): Buffer {
  const bytes = Buffer.from(domain);
  return Buffer.from([0x0a, bytes.length, ...bytes]);
}

const OVER: RateLimitResponse = {
  overallCode: 'OVER_LIMIT',
  statuses: [{ code: 'OVER_LIMIT', limitRemaining: 0, durationUntilResetSeconds: 30, currentLimit: { requestsPerUnit: 5, unit: 'MINUTE' } }],
  responseHeadersToAdd: [{ key: 'x-ratelimit-limit', value: '5' }],
  requestHeadersToAdd: [],
} as unknown as RateLimitResponse;

/** Each domain a behaviour; `hang` waits for the end of the test. */
const service: RateLimitHandler = {
  shouldRateLimit(request: RateLimitRequest): Promise<RateLimitResponse> {
    if (request.domain === 'refused') return Promise.reject(new InvalidRequestError('descriptor 0: 100% "wrong" ü'));
    if (request.domain === 'broken') return Promise.reject(new Error('something broke'));
    if (request.domain === 'hang') return new Promise(() => {});
    return Promise.resolve(OVER);
  },
};

const MAX = 4096;
const limits = loadSettings({ GRPC_MAX_RECEIVE_MESSAGE_BYTES: String(MAX) }).grpcLimits;

interface Side {
  server: GrpcServer;
  port: number;
  session: ClientHttp2Session;
  health: HealthState;
}

async function start(kind: RlsHandlerKind): Promise<Side> {
  const health = new HealthState({ backendHealthy: () => true, backendCountsForHealth: true, rulesReady: () => true });
  const server = new GrpcServer({
    service,
    health,
    metrics: new PrometheusMetrics(),
    logger: createLogger('ERROR', 'text', () => {}),
    defaultDeadlineMs: 1000,
    limits,
    rlsHandler: kind,
  });
  const port = await server.listen('127.0.0.1:0');
  return { server, port, session: http2.connect(`http://127.0.0.1:${port}`), health };
}

/** What a client sees of an answer, without the bytes that may differ (none should). */
function seen(a: RawAnswer): Record<string, unknown> {
  return {
    httpStatus: a.headers[':status'],
    contentType: a.headers['content-type'],
    trailersOnly: a.trailers === undefined,
    status: a.status,
    message: a.message,
    body: a.body.toString('hex'),
  };
}

const CASES: [string, Omit<RawSend, 'path'>][] = [
  ['an answer', { chunks: [frame(domainRequest('ok'))] }],
  [
    'a message cut in the prefix and the body',
    { chunks: [frame(domainRequest('ok')).subarray(0, 3), frame(domainRequest('ok')).subarray(3, 7), frame(domainRequest('ok')).subarray(7)] },
  ],
  ['two messages in one chunk', { chunks: [Buffer.concat([frame(domainRequest('ok')), frame(domainRequest('ok'))])] }],
  ['two messages in two chunks', { chunks: [frame(domainRequest('ok')), frame(domainRequest('ok'))] }],
  ['no message', { chunks: [] }],
  ['half a message', { chunks: [frame(domainRequest('ok')).subarray(0, 6)] }],
  ['a length over the bound, the request unfinished', { chunks: [Buffer.from([0, 0, 0, 0x10, 0x01])], end: false }],
  ['gzip', { headers: { 'grpc-encoding': 'gzip' }, chunks: [frame(gzipSync(domainRequest('ok')), 1)] }],
  ['deflate', { headers: { 'grpc-encoding': 'deflate' }, chunks: [frame(deflateSync(domainRequest('ok')), 1)] }],
  ['an unknown encoding', { headers: { 'grpc-encoding': 'br' }, chunks: [frame(domainRequest('ok'), 1)] }],
  ['gzip past the bound', { headers: { 'grpc-encoding': 'gzip' }, chunks: [frame(gzipSync(Buffer.alloc(16 * MAX)), 1)] }],
  ['gzip that is not', { headers: { 'grpc-encoding': 'gzip' }, chunks: [frame(Buffer.from('plain'), 1)] }],
  ['the flag unset under gzip', { headers: { 'grpc-encoding': 'gzip' }, chunks: [frame(domainRequest('ok'))] }],
  ['application/json', { headers: { 'content-type': 'application/json' }, chunks: [frame(domainRequest('ok'))] }],
  ['application/grpc+proto', { headers: { 'content-type': 'application/grpc+proto' }, chunks: [frame(domainRequest('ok'))] }],
  ['a grpc-timeout that is not one', { headers: { 'grpc-timeout': '1x' }, chunks: [frame(domainRequest('ok'))] }],
  ['bytes that are not a RateLimitRequest', { chunks: [frame(Buffer.from([0x0a, 0x09, 0x61]))] }],
  ['a refusal from the service', { chunks: [frame(domainRequest('refused'))] }],
  ['an error in the service', { chunks: [frame(domainRequest('broken'))] }],
  ['a call past its deadline', { headers: { 'grpc-timeout': '30m' }, chunks: [frame(domainRequest('hang'))] }],
];

describe('GRPC_RLS_HANDLER=http2 answers as grpc-js does', () => {
  let js: Side;
  let h2: Side;
  beforeAll(async () => {
    [js, h2] = await Promise.all([start('grpc-js'), start('http2')]);
  });
  afterAll(async () => {
    for (const side of [js, h2]) {
      side?.session.close();
      await side?.server.shutdown(0);
      side?.health.close();
    }
  });

  it.each(CASES)('%s', async (_name, send) => {
    const [a, b] = await Promise.all([js, h2].map((side) => rawGrpcCall(side.session, { path: RLS_PATH, ...send })));
    expect(seen(b!)).toEqual(seen(a!));
  });

  it('serves ShouldRateLimit and grpc.health.v1 to a grpc-js client, whose own deadline and cancel work', async () => {
    const client = rlsClient(`127.0.0.1:${h2.port}`);
    try {
      expect((await client.shouldRateLimit(oneDescriptor('ok', { k: 'v' }))).overall_code).toBe('OVER_LIMIT');
      expect(await client.healthCheck()).toBe('SERVING');
      const late = await client.shouldRateLimit(oneDescriptor('hang', { k: 'v' }), 50).catch((err: grpc.ServiceError) => err);
      expect((late as grpc.ServiceError).code).toBe(grpc.status.DEADLINE_EXCEEDED);
    } finally {
      client.close();
    }
  });
});
