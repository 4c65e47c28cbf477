// Edge cases of GRPC_RLS_HANDLER=http2 (the default, issue 29) found in review (review2): what
// grpc-js answers is the expected answer, side by side on two servers; and a long grpc-timeout
// must not make node emit a process warning per call (a client-triggered log flood).
import http2, { type ClientHttp2Session } from 'node:http2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HealthState } from '../../src/base/health';
import { createLogger } from '../../src/base/log';
import { GrpcServer, type RlsHandlerKind } from '../../src/grpc/grpc-server';
import { RLS_PATH } from '../../src/grpc/rls-stream-handler';
import { PrometheusMetrics } from '../../src/metrics/metrics';
import type { RateLimitHandler } from '../../src/service/rate-limit-handler';
import type { RateLimitRequest, RateLimitResponse } from '../../src/service/types';
import { loadSettings } from '../../src/settings/settings';
import { grpcFrame as frame, rawGrpcCall, type RawAnswer } from '../helpers/raw-grpc-call';

function domainRequest(domain: string): Buffer {
  const bytes = Buffer.from(domain);
  return Buffer.from([0x0a, bytes.length, ...bytes]);
}
const OK: RateLimitResponse = { overallCode: 'OK', statuses: [], responseHeadersToAdd: [], requestHeadersToAdd: [] };
const service: RateLimitHandler = {
  shouldRateLimit(request: RateLimitRequest): Promise<RateLimitResponse> {
    if (request.domain === 'hang') return new Promise(() => {});
    return Promise.resolve(OK);
  },
};
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
    limits: loadSettings({}).grpcLimits,
    rlsHandler: kind,
  });
  const port = await server.listen('127.0.0.1:0');
  return { server, port, session: http2.connect(`http://127.0.0.1:${port}`), health };
}
function seen(a: RawAnswer): Record<string, unknown> {
  return {
    httpStatus: a.headers[':status'],
    trailersOnly: a.trailers === undefined,
    status: a.status,
    message: a.message,
    body: a.body.toString('hex'),
  };
}

describe('ShouldRateLimit edge cases, grpc-js and http2 side by side', () => {
  let js: Side;
  let h2: Side;
  const warnings: string[] = [];
  const onWarning = (w: Error): void => void warnings.push(`${w.name}: ${w.message}`);
  beforeAll(async () => {
    [js, h2] = await Promise.all([start('grpc-js'), start('http2')]);
    process.on('warning', onWarning);
  });
  afterAll(async () => {
    process.off('warning', onWarning);
    for (const side of [js, h2]) {
      side?.session.destroy();
      await side?.server.shutdown(0);
      side?.health.close();
    }
  });

  const cases: [string, Record<string, string>, Buffer[]][] = [
    ['grpc-timeout 9 digits', { 'grpc-timeout': '123456789m' }, [frame(domainRequest('ok'))]],
    ['grpc-timeout with a space', { 'grpc-timeout': '5 S' }, [frame(domainRequest('ok'))]],
    ['grpc-timeout duplicated', { 'grpc-timeout': '5S, 6S' }, [frame(domainRequest('ok'))]],
    ['3 trailing bytes after the message', {}, [Buffer.concat([frame(domainRequest('ok')), Buffer.from([0, 0, 0])])]],
    ['3 trailing bytes in a DATA frame of their own', {}, [frame(domainRequest('ok')), Buffer.from([0, 0, 0])]],
    ['a second prefix whole, its message partial', {}, [Buffer.concat([frame(domainRequest('ok')), Buffer.from([0, 0, 0, 0, 9, 1, 2])])]],
    ['a second, empty message (its prefix alone)', {}, [Buffer.concat([frame(domainRequest('ok')), Buffer.from([0, 0, 0, 0, 0])])]],
    ['a second prefix cut across DATA frames', {}, [Buffer.concat([frame(domainRequest('ok')), Buffer.from([0, 0])]), Buffer.from([0, 0, 0])]],
    ['a second prefix over the bound', {}, [Buffer.concat([frame(domainRequest('ok')), Buffer.from([0, 0xff, 0xff, 0xff, 0xff])])]],
    [
      'a second message whole, then a third prefix over the bound',
      {},
      [Buffer.concat([frame(domainRequest('ok')), frame(domainRequest('ok')), Buffer.from([0, 0xff, 0xff, 0xff, 0xff])])],
    ],
    // Only with a call that hangs: 700H wraps to a deadline already past (grpc-js' `| 0`), so a call
    // answered at once races a 1 ms timer on both servers, and which wins is the machine's doing.
    ['grpc-timeout past 2^31 ms, a call that hangs', { 'grpc-timeout': '700H' }, [frame(domainRequest('hang'))]],
    ['grpc-timeout amid other text', { 'grpc-timeout': 'x1Sy' }, [frame(domainRequest('ok'))]],
    ['grpc-timeout that is not one', { 'grpc-timeout': 'soon' }, [frame(domainRequest('ok'))]],
    ['grpc-timeout not printable ASCII', { 'grpc-timeout': '5S\u00e9' }, [frame(domainRequest('ok'))]],
  ];
  it.each(cases)('parity: %s', async (_n, headers, chunks) => {
    const [a, b] = await Promise.all([js, h2].map((s) => rawGrpcCall(s.session, { path: RLS_PATH, headers, chunks })));
    expect(seen(b!)).toEqual(seen(a!));
  });

  it('no process warning per call for a long grpc-timeout', async () => {
    warnings.length = 0;
    for (let i = 0; i < 3; i++)
      await rawGrpcCall(h2.session, { path: RLS_PATH, headers: { 'grpc-timeout': '700H' }, chunks: [frame(domainRequest('ok'))] });
    await new Promise((r) => setTimeout(r, 50));
    expect(warnings).toEqual([]);
  });
});
