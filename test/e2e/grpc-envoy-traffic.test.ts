// Review of issue 26's bounds (findings 1 and 2), against the built server (`npm run build`
// first), with raw HTTP/2 (node:http2) behaving as Envoy's codec does: a burst of calls as soon as
// TCP is up, before the server's SETTINGS, and every call reset exactly at its 20 ms grpc-timeout
// while the server stalls (SIGSTOP/SIGCONT stand in for a GC pause or CPU starvation). Neither
// may cost Envoy its calls or its connection.
import * as http2 from 'node:http2';
import { afterEach, describe, expect, test } from 'vitest';
import { spawnServer, type ServerWithRules } from '../helpers/server-process';

const RULES = {
  'b.yaml': `
domain: b
descriptors:
  - key: k
    rate_limit: { unit: hour, requests_per_unit: 1000000 }
`,
};

let server: ServerWithRules | undefined;
afterEach(() => {
  if (server?.proc.pid !== undefined) signal(server.proc.pid, 'SIGCONT');
  server?.cleanup();
  server = undefined;
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // Already gone.
  }
}

/** One ShouldRateLimit request message (domain b, k=v) with its gRPC length prefix. */
function message(): Buffer {
  const entry = Buffer.from([0x0a, 1, 0x6b, 0x12, 1, 0x76]);
  const body = Buffer.concat([Buffer.from([0x0a, 1, 0x62, 0x12, entry.length + 2, 0x0a, entry.length]), entry]);
  return Buffer.concat([Buffer.from([0, 0, 0, 0, body.length]), body]);
}

const HEADERS = {
  ':method': 'POST',
  ':path': '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit',
  'content-type': 'application/grpc',
  te: 'trailers',
};

interface Outcome {
  /** grpc-status of the answer, 'refused' for RST_STREAM REFUSED_STREAM, 'reset N' for another code. */
  status: string;
}

/** One call on `session`; `resetAfterMs`: RST_STREAM(CANCEL) then, as Envoy at its timeout. */
function call(session: http2.ClientHttp2Session, extra: Record<string, string> = {}, resetAfterMs?: number): Promise<Outcome> {
  return new Promise((resolve) => {
    if (session.closed || session.destroyed) return resolve({ status: 'closed' });
    const stream = session.request({ ...HEADERS, ...extra });
    let status = 'no trailers';
    stream.on('trailers', (t: http2.IncomingHttpHeaders) => (status = String(t['grpc-status'])));
    stream.on('error', () => {});
    const timer = resetAfterMs === undefined ? undefined : setTimeout(() => stream.close(http2.constants.NGHTTP2_CANCEL), resetAfterMs);
    stream.once('close', () => {
      clearTimeout(timer);
      if (stream.rstCode === http2.constants.NGHTTP2_REFUSED_STREAM) status = 'refused';
      else if (status === 'no trailers' && stream.rstCode !== undefined && stream.rstCode !== 0) status = `reset ${stream.rstCode}`;
      resolve({ status });
    });
    stream.resume();
    stream.end(message());
  });
}

function tally(outcomes: Outcome[]): Record<string, number> {
  const t: Record<string, number> = {};
  for (const o of outcomes) t[o.status] = (t[o.status] ?? 0) + 1;
  return t;
}

describe("Envoy's traffic on the gRPC bounds (review of issue 26)", () => {
  test('a fresh connection sending 50 calls at once, before the server SETTINGS: none refused', async () => {
    server = await spawnServer(RULES, { LOG_LEVEL: 'WARN' });
    const rounds: Record<string, number>[] = [];
    for (let round = 0; round < 3; round++) {
      const session = http2.connect(`http://127.0.0.1:${server.grpcPort}`);
      session.on('error', () => {});
      // Queued before the connection is up: they go out with the preface, as Envoy's pool sends them.
      const calls = Array.from({ length: 50 }, () => call(session, { 'grpc-timeout': '5S' }));
      rounds.push(tally(await Promise.all(calls)));
      session.destroy();
    }
    console.log(`50 calls at once on a fresh connection, 3 times: ${rounds.map((r) => JSON.stringify(r)).join(', ')}`);
    for (const r of rounds) {
      expect(r['refused'] ?? 0).toBe(0);
      expect(r['0']).toBe(50);
    }
  }, 60_000);

  test('calls reset exactly at their 20 ms grpc-timeout while the server stalls: the connection survives', async () => {
    server = await spawnServer(RULES, { LOG_LEVEL: 'WARN' });
    const pid = server.proc.pid as number;
    const session = http2.connect(`http://127.0.0.1:${server.grpcPort}`);
    session.on('error', () => {});
    let goaway: number | undefined;
    session.once('goaway', (code: number) => (goaway = code));
    const first = await call(session);
    expect(first.status).toBe('0');
    const outcomes: Outcome[] = [];
    // 8 stalls of 60 ms; during each, 60 calls that Envoy resets at their 20 ms deadline: the
    // server reads their HEADERS and RST_STREAM together once it runs again.
    for (let stall = 0; stall < 8 && goaway === undefined; stall++) {
      signal(pid, 'SIGSTOP');
      const calls = Array.from({ length: 60 }, () => call(session, { 'grpc-timeout': '20m' }, 20));
      await sleep(60);
      signal(pid, 'SIGCONT');
      outcomes.push(...(await Promise.all(calls)));
      await sleep(200);
    }
    const after = await call(session);
    session.destroy();
    console.log(
      `8 stalls of 60 ms, 60 calls reset at their 20 ms deadline in each: ${JSON.stringify(tally(outcomes))}; ` +
        `GOAWAY ${goaway ?? 'none'}; the next call on the connection: grpc-status ${after.status}`,
    );
    expect(goaway).toBeUndefined();
    expect(after.status).toBe('0');
  }, 60_000);
});
