// What a finished ShouldRateLimit call leaves reachable from its node:http2 stream (issue 29).
// node:http2 keeps a closed stream's objects alive across scavenges (until the next full GC), so
// whatever a stream still references when it closes is copied, promoted, and left for a
// mark-compact: per-call closures on its listeners used to hang the whole call there (its
// headers, framer and message). Here the streams are held on purpose, as that retention does,
// and after their calls no call object may be reachable from them.
import http2, { type ClientHttp2Session, type ServerHttp2Stream } from 'node:http2';
import { queryObjects } from 'node:v8';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/base/log';
import { PrometheusMetrics } from '../../../src/metrics/metrics';
import { RequestFramer } from '../../../src/grpc/request-framer';
import { RLS_PATH, rlsStreamHandler } from '../../../src/grpc/rls-stream-handler';
import type { RateLimitHandler } from '../../../src/service/rate-limit-handler';
import type { RateLimitResponse } from '../../../src/service/types';
import { rawGrpcCall as call, grpcFrame as frame } from '../../helpers/raw-grpc-call';

const OK_RESPONSE: RateLimitResponse = { overallCode: 'OK', statuses: [], responseHeadersToAdd: [], requestHeadersToAdd: [] };
const service: RateLimitHandler = { shouldRateLimit: () => Promise.resolve(OK_RESPONSE) };
const CALLS = 20;

describe('a finished call on node:http2 (rls-stream-handler)', () => {
  const server = http2.createServer();
  const kept: ServerHttp2Stream[] = [];
  // Before the handler: holds every stream, as node:http2 itself does until a full GC.
  server.on('stream', (stream) => kept.push(stream));
  server.on(
    'stream',
    rlsStreamHandler({
      service,
      metrics: new PrometheusMetrics(),
      logger: createLogger('ERROR', 'text', () => {}),
      defaultDeadlineMs: 1000,
      maxReceiveMessageBytes: 1024,
    }),
  );
  let session: ClientHttp2Session;

  beforeAll(async () => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    session = http2.connect(`http://127.0.0.1:${port}`);
  });
  afterAll(async () => {
    session?.close();
    await new Promise((r) => server.close(r));
  });

  it.each([
    ['without grpc-timeout', {}],
    ['with grpc-timeout', { 'grpc-timeout': '5S' }],
  ])('leaves none of its own objects reachable from its closed stream (%s)', async (_name, headers) => {
    kept.length = 0;
    const answers = await Promise.all(
      Array.from({ length: CALLS }, () => call(session, { path: RLS_PATH, headers, chunks: [frame(Buffer.from([0x0a, 1, 0x61]))] })),
    );
    expect(answers.map((a) => a.status)).toEqual(Array(CALLS).fill(0));
    // The server's side of each stream closes once its END_STREAM is out and the client's is in.
    for (let i = 0; i < 100 && !kept.every((s) => s.closed); i++) await new Promise((r) => setTimeout(r, 10));
    expect(kept).toHaveLength(CALLS);
    expect(kept.every((s) => s.closed)).toBe(true);
    // After a full GC: with the streams still held, a call reachable from one keeps its framer.
    expect(queryObjects(RequestFramer, { format: 'count' })).toBe(0);
  });
});
