// ShouldRateLimit served straight on node:http2 (issue 29): the handler on a plain node:http2
// server, driven by a raw HTTP/2 client that controls every frame. What grpc-js answers for each
// case is what this handler must answer (see test/e2e/grpc-rls-handler-parity.test.ts, which
// puts the two side by side).
import http2, { type ClientHttp2Session, type IncomingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import { Socket } from 'node:net';
import { TLSSocket } from 'node:tls';
import { gzipSync } from 'node:zlib';
import { status as GrpcStatus } from '@grpc/grpc-js';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { InvalidRequestError } from '../../../src/base/errors';
import { createLogger } from '../../../src/base/log';
import { PrometheusMetrics } from '../../../src/metrics/metrics';
import { RLS_PATH, rlsStreamHandler, sanChecker } from '../../../src/grpc/rls-stream-handler';
import type { IncomingCarrier, RateLimitHandler } from '../../../src/service/rate-limit-handler';
import type { RateLimitRequest, RateLimitResponse } from '../../../src/service/types';
import { rawGrpcCall as call, grpcFrame as frame } from '../../helpers/raw-grpc-call';

const MAX = 1024;

function domainRequest(domain: string): Buffer {
  const bytes = Buffer.from(domain);
  return Buffer.from([0x0a, bytes.length, ...bytes]);
}

const OK_RESPONSE: RateLimitResponse = { overallCode: 'OK', statuses: [], responseHeadersToAdd: [], requestHeadersToAdd: [] };

interface Seen {
  request: RateLimitRequest;
  deadline: number;
  incoming: IncomingCarrier | undefined;
}

/** ok: answers OK; refused: INVALID_ARGUMENT; hang: answers when released. */
class FakeService implements RateLimitHandler {
  readonly seen: Seen[] = [];
  private readonly hanging: (() => void)[] = [];
  shouldRateLimit(request: RateLimitRequest, deadline: number, incoming?: IncomingCarrier): Promise<RateLimitResponse> {
    this.seen.push({ request, deadline, incoming });
    if (request.domain === 'refused') return Promise.reject(new InvalidRequestError('descriptor 0: no 100% "ünicode" here'));
    if (request.domain === 'hang') return new Promise((resolve) => this.hanging.push(() => resolve(OK_RESPONSE)));
    return Promise.resolve(OK_RESPONSE);
  }
  release(): void {
    for (const r of this.hanging.splice(0)) r();
  }
}

describe('ShouldRateLimit on node:http2 (rls-stream-handler)', () => {
  const service = new FakeService();
  const metrics = new PrometheusMetrics();
  const server = http2.createServer();
  server.on(
    'stream',
    rlsStreamHandler({
      service,
      metrics,
      logger: createLogger('ERROR', 'text', () => {}),
      defaultDeadlineMs: 1000,
      maxReceiveMessageBytes: MAX,
    }),
  );
  let session: ClientHttp2Session;

  beforeAll(async () => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    session = http2.connect(`http://127.0.0.1:${port}`);
  });
  afterAll(async () => {
    service.release();
    session?.close();
    await new Promise((r) => server.close(r));
  });
  beforeEach(() => {
    service.seen.length = 0;
  });

  it('answers a whole message: headers, one length-prefixed RateLimitResponse, grpc-status 0 in the trailers', async () => {
    const answer = await call(session, { path: RLS_PATH, chunks: [frame(domainRequest('ok'))] });
    expect(answer.headers[':status']).toBe(200);
    expect(answer.headers['content-type']).toBe('application/grpc+proto');
    expect(answer.headers['grpc-status']).toBeUndefined();
    expect(answer.trailers?.['grpc-status']).toBe('0');
    // overall_code OK (1): field 1, varint.
    expect(answer.body).toEqual(Buffer.from([0, 0, 0, 0, 2, 0x08, 0x01]));
    expect(service.seen.map((s) => s.request.domain)).toEqual(['ok']);
  });

  it('reads a message cut across DATA frames, inside the prefix and inside the body', async () => {
    const whole = frame(domainRequest('ok'));
    const answer = await call(session, { path: RLS_PATH, chunks: [whole.subarray(0, 2), whole.subarray(2, 6), whole.subarray(6)] });
    expect(answer.status).toBe(GrpcStatus.OK);
    expect(service.seen.map((s) => s.request.domain)).toEqual(['ok']);
  });

  it('refuses two messages with UNIMPLEMENTED, as grpc-js does for a unary method, and never asks the service', async () => {
    const one = frame(domainRequest('ok'));
    for (const chunks of [[Buffer.concat([one, one])], [one, one]]) {
      const answer = await call(session, { path: RLS_PATH, chunks });
      expect(answer.status).toBe(GrpcStatus.UNIMPLEMENTED);
      expect(answer.message).toBe(`Received a second request message for server streaming method ${RLS_PATH}`);
    }
    expect(service.seen).toEqual([]);
  });

  it('refuses a request without a whole message with UNIMPLEMENTED, as grpc-js does', async () => {
    for (const chunks of [[], [frame(domainRequest('ok')).subarray(0, 7)]]) {
      const answer = await call(session, { path: RLS_PATH, chunks });
      expect(answer.status).toBe(GrpcStatus.UNIMPLEMENTED);
      expect(answer.message).toBe(`Received no request message for server streaming method ${RLS_PATH}`);
    }
    expect(service.seen).toEqual([]);
  });

  it('refuses a length over GRPC_MAX_RECEIVE_MESSAGE_BYTES from its prefix, at once, before the rest has arrived', async () => {
    // The prefix alone, and no END_STREAM: the answer cannot wait for the message.
    const prefix = Buffer.from([0, 0, 0, 0x04, 0x01]);
    const answer = await call(session, { path: RLS_PATH, chunks: [prefix], end: false });
    expect(answer.status).toBe(GrpcStatus.RESOURCE_EXHAUSTED);
    expect(answer.message).toBe(`Received message larger than max (1025 vs ${MAX})`);
    // Trailers-Only: the status in the one HEADERS frame.
    expect(answer.trailers).toBeUndefined();
    expect(answer.headers['grpc-status']).toBe(String(GrpcStatus.RESOURCE_EXHAUSTED));
    expect(service.seen).toEqual([]);
  });

  it('takes a gzip or deflate message as grpc-js does, and refuses an unknown encoding with UNIMPLEMENTED', async () => {
    const gz = await call(session, { path: RLS_PATH, headers: { 'grpc-encoding': 'gzip' }, chunks: [frame(gzipSync(domainRequest('ok')), 1)] });
    expect(gz.status).toBe(GrpcStatus.OK);
    const unknown = await call(session, { path: RLS_PATH, headers: { 'grpc-encoding': 'snappy' }, chunks: [frame(domainRequest('ok'), 1)] });
    expect(unknown.status).toBe(GrpcStatus.UNIMPLEMENTED);
    expect(unknown.message).toBe('Received message compressed with unsupported encoding "snappy"');
    // A message that inflates past the bound: refused, never inflated whole.
    const bomb = await call(session, {
      path: RLS_PATH,
      headers: { 'grpc-encoding': 'gzip' },
      chunks: [frame(gzipSync(Buffer.alloc(64 * MAX)), 1)],
    });
    expect(bomb.status).toBe(GrpcStatus.RESOURCE_EXHAUSTED);
    expect(bomb.message).toBe(`Received message that decompresses to a size larger than ${MAX}`);
    const garbage = await call(session, { path: RLS_PATH, headers: { 'grpc-encoding': 'gzip' }, chunks: [frame(Buffer.from('not gzip'), 1)] });
    expect(garbage.status).toBe(GrpcStatus.INTERNAL);
    expect(garbage.message).toBe('Failed to decompress message');
    // The flag unset: the bytes are the message, whatever grpc-encoding says.
    const plain = await call(session, { path: RLS_PATH, headers: { 'grpc-encoding': 'gzip' }, chunks: [frame(domainRequest('ok'))] });
    expect(plain.status).toBe(GrpcStatus.OK);
    expect(service.seen.map((s) => s.request.domain)).toEqual(['ok', 'ok']);
  });

  it('answers 415 to a content-type other than application/grpc*, as grpc-js does', async () => {
    const answer = await call(session, {
      path: RLS_PATH,
      headers: { 'content-type': 'application/json' },
      chunks: [frame(domainRequest('ok'))],
    });
    expect(answer.headers[':status']).toBe(415);
    expect(service.seen).toEqual([]);
  });

  it('maps a service error through error-status.ts, Trailers-Only, the message percent-encoded', async () => {
    const answer = await call(session, { path: RLS_PATH, chunks: [frame(domainRequest('refused'))] });
    expect(answer.trailers).toBeUndefined();
    expect(answer.headers[':status']).toBe(200);
    expect(answer.status).toBe(GrpcStatus.INVALID_ARGUMENT);
    expect(answer.message).toBe('descriptor 0: no 100% "ünicode" here');
    // On the wire: printable ASCII without spaces or quotes.
    expect(String(answer.headers['grpc-message'])).toMatch(/^[!#-~]+$/);
  });

  it('answers bytes that are not a RateLimitRequest with INVALID_ARGUMENT', async () => {
    const answer = await call(session, { path: RLS_PATH, chunks: [frame(Buffer.from([0x0a, 0x05, 0x61]))] });
    expect(answer.status).toBe(GrpcStatus.INVALID_ARGUMENT);
    expect(answer.message).toMatch(/malformed RateLimitRequest/);
  });

  it('gives the service the deadline from grpc-timeout, or the default, and the headers for tracing', async () => {
    const before = Date.now();
    await call(session, {
      path: RLS_PATH,
      headers: { 'grpc-timeout': '5S', traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' },
      chunks: [frame(domainRequest('ok'))],
    });
    await call(session, { path: RLS_PATH, chunks: [frame(domainRequest('ok'))] });
    const after = Date.now();
    const [timed, untimed] = service.seen;
    expect(timed!.deadline).toBeGreaterThanOrEqual(before + 5000);
    expect(timed!.deadline).toBeLessThanOrEqual(after + 5000);
    expect(untimed!.deadline).toBeGreaterThanOrEqual(before + 1000);
    expect(untimed!.deadline).toBeLessThanOrEqual(after + 1000);
    expect((timed!.incoming as IncomingHttpHeaders).traceparent).toBe('00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01');
  });

  it('answers DEADLINE_EXCEEDED at the deadline while the service has not answered', async () => {
    const answer = await call(session, { path: RLS_PATH, headers: { 'grpc-timeout': '50m' }, chunks: [frame(domainRequest('hang'))] });
    expect(answer.status).toBe(GrpcStatus.DEADLINE_EXCEEDED);
    expect(answer.message).toBe('Deadline exceeded');
    service.release();
  });

  it('refuses a grpc-timeout it cannot read with INTERNAL, as grpc-js does', async () => {
    const answer = await call(session, { path: RLS_PATH, headers: { 'grpc-timeout': 'soon' }, chunks: [frame(domainRequest('ok'))] });
    expect(answer.status).toBe(GrpcStatus.INTERNAL);
    expect(answer.message).toBe('Invalid grpc-timeout value "soon"');
  });

  it('counts each call the service answered, and each error by type, as grpc-server.ts does', async () => {
    const done = async (): Promise<number> => {
      const text = await metrics.registry.getSingleMetricAsString('ratelimit_service_total_requests');
      return Number(/grpc_method="ShouldRateLimit"\} (\d+)/.exec(text)?.[1] ?? 0);
    };
    const errors = async (): Promise<string> => metrics.registry.getSingleMetricAsString('ratelimit_service_should_rate_limit_error');
    const start = await done();
    await call(session, { path: RLS_PATH, chunks: [frame(domainRequest('ok'))] });
    await call(session, { path: RLS_PATH, chunks: [frame(domainRequest('refused'))] });
    expect((await done()) - start).toBe(2);
    expect(await errors()).toMatch(/err_type="invalid_request"\} [1-9]/);
  });
});

describe('sanChecker', () => {
  it('refuses, without throwing, a connection whose TLS handle is gone (getPeerCertificate() is null then)', async () => {
    const socket = new TLSSocket(new Socket());
    const closed = new Promise((resolve) => socket.once('close', resolve));
    socket.destroy();
    await closed;
    // As if the handshake had been verified before the handle went.
    Object.defineProperty(socket, 'authorized', { value: true });
    expect(socket.getPeerCertificate()).toBeNull();
    const stream = { session: { socket } } as unknown as ServerHttp2Stream;
    expect(sanChecker('client.example')(stream)).toBe(false);
  });
});
