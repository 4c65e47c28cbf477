// Review of issue 26's bounds (findings 1 to 4, and 6), against the built server (`npm run build`
// first), with raw HTTP/2 (node:http2) behaving as Envoy's codec does: a burst of calls as soon as
// TCP is up, before the server's SETTINGS, and every call reset exactly at its 20 ms grpc-timeout
// while the server stalls (SIGSTOP/SIGCONT stand in for a GC pause or CPU starvation). Neither
// may cost Envoy its calls or its connection.
import * as http2 from 'node:http2';
import * as net from 'node:net';
import { afterEach, describe, expect, test } from 'vitest';
import { spawnServer, type ServerWithRules } from '../helpers/server-process';
import { DOMAIN_B_RULES } from '../helpers/domain-b';

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
    server = await spawnServer(DOMAIN_B_RULES, { LOG_LEVEL: 'WARN' });
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
    server = await spawnServer(DOMAIN_B_RULES, { LOG_LEVEL: 'WARN' });
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

  test('a new connection whose every call Envoy resets at its 20 ms deadline (the server stalled) is a client: kept past GRPC_MAX_FIRST_CALL_TIME', async () => {
    server = await spawnServer(DOMAIN_B_RULES, { LOG_LEVEL: 'WARN', GRPC_MAX_FIRST_CALL_TIME: '1s' });
    const pid = server.proc.pid as number;
    const session = http2.connect(`http://127.0.0.1:${server.grpcPort}`);
    session.on('error', () => {});
    await new Promise((resolve) => session.once('connect', resolve));
    let closedAt: number | undefined;
    const t0 = performance.now();
    session.once('close', () => (closedAt = performance.now() - t0));
    const outcomes: Outcome[] = [];
    // Three times GRPC_MAX_FIRST_CALL_TIME by this test's clock: no call is ever answered.
    for (let i = 0; i < 100 && performance.now() - t0 < 3000 && closedAt === undefined; i++) {
      signal(pid, 'SIGSTOP');
      const calls = [call(session, { 'grpc-timeout': '20m' }, 20)];
      await sleep(60);
      signal(pid, 'SIGCONT');
      outcomes.push(...(await Promise.all(calls)));
      await sleep(100);
    }
    const after = await call(session);
    session.destroy();
    console.log(
      `GRPC_MAX_FIRST_CALL_TIME=1s, a new connection's calls all reset at their 20 ms deadline for 3 s: ${JSON.stringify(tally(outcomes))}; ` +
        `${closedAt === undefined ? 'kept' : `closed by the server after ${closedAt.toFixed(0)} ms`}; the next call: grpc-status ${after.status}`,
    );
    expect(closedAt).toBeUndefined();
    expect(after.status).toBe('0');
  }, 60_000);

  test('a full port: a new connection that has sent its first call outlasts 30 reopened connections that sent only the preface', async () => {
    server = await spawnServer(DOMAIN_B_RULES, { LOG_LEVEL: 'WARN', GRPC_MAX_CONNECTIONS: '10' });
    const port = server.grpcPort;
    const holders: net.Socket[] = [];
    const hold = async (): Promise<void> => {
      const socket = net.connect(port, '127.0.0.1');
      socket.on('error', () => {});
      await new Promise((resolve) => socket.once('connect', resolve));
      socket.write(PREFACE_AND_SETTINGS);
      holders.push(socket);
    };
    for (let i = 0; i < 9; i++) await hold();
    const session = http2.connect(`http://127.0.0.1:${port}`);
    session.on('error', () => {});
    let closed = false;
    session.once('close', () => (closed = true));
    const stream = session.request(HEADERS);
    stream.on('error', () => {});
    let status = 'no trailers';
    stream.on('trailers', (t: http2.IncomingHttpHeaders) => (status = String(t['grpc-status'])));
    const done = new Promise((resolve) => stream.once('close', resolve));
    stream.resume();
    // Its HEADERS have reached the server once it acknowledges our SETTINGS... and a round trip more.
    await new Promise((resolve) => session.once('remoteSettings', resolve));
    await new Promise((resolve) => session.ping(resolve));
    // Each of these takes the slot of another: never the one with a call under way.
    for (let i = 0; i < 30; i++) await hold();
    await new Promise((resolve) => session.ping(resolve));
    stream.end(message());
    await Promise.race([done, sleep(10_000)]);
    const wasClosed = closed;
    session.destroy();
    for (const h of holders) h.destroy();
    console.log(
      `GRPC_MAX_CONNECTIONS=10, 9 + 30 preface-only connections around one with a call under way: the call's grpc-status ${status}, its connection ${wasClosed ? 'closed' : 'kept'}`,
    );
    expect(status).toBe('0');
    expect(wasClosed).toBe(false);
  }, 60_000);
});

describe("the request budget and a client's connection (review of issue 26, finding 6)", () => {
  test('a full budget resets the oldest unfinished call; its connection, holding little, keeps going', async () => {
    server = await spawnServer(DOMAIN_B_RULES, {
      LOG_LEVEL: 'WARN',
      GRPC_MAX_RECEIVE_MESSAGE_BYTES: '65536',
      GRPC_MAX_UNFINISHED_REQUEST_BYTES: '1048576',
      GRPC_MAX_REQUEST_RECEIVE_TIME: '1h',
    });
    const url = `http://127.0.0.1:${server.grpcPort}`;
    // The client: one large request still arriving (its first half sent), the oldest of all.
    const client = http2.connect(url);
    client.on('error', () => {});
    let clientGoaway: number | undefined;
    client.once('goaway', (code: number) => (clientGoaway = code));
    await new Promise((resolve) => client.once('remoteSettings', resolve));
    const large = client.request(HEADERS);
    large.on('error', () => {});
    const largeClosed = new Promise((resolve) => large.once('close', resolve));
    large.resume();
    large.write(Buffer.concat([Buffer.from([0, 0, 0, 0xf0, 0]), Buffer.alloc(30_000, 0x61)]));
    await new Promise((resolve) => client.ping(resolve));
    // Another connection fills the budget with 100 unfinished calls of 30 KB each.
    const attacker = http2.connect(url);
    attacker.on('error', () => {});
    let attackerGoaway: number | undefined;
    let attackerReason = '';
    attacker.once('goaway', (code: number, _last: number, data?: Buffer) => {
      attackerGoaway = code;
      attackerReason = data?.toString('latin1') ?? '';
    });
    await new Promise((resolve) => attacker.once('remoteSettings', resolve));
    for (let i = 0; i < 100 && attackerGoaway === undefined; i++) {
      const s = attacker.request(HEADERS);
      s.on('error', () => {});
      s.write(Buffer.concat([Buffer.from([0, 0, 0, 0xf0, 0]), Buffer.alloc(30_000, 0x62)]));
    }
    await Promise.race([largeClosed, sleep(20_000)]);
    const after = await call(client);
    client.destroy();
    attacker.destroy();
    console.log(
      `budget 1 MiB full: the client's oldest large call reset ${large.rstCode === undefined ? 'no' : `(code ${large.rstCode})`}; ` +
        `its connection: GOAWAY ${clientGoaway ?? 'none'}, the next call grpc-status ${after.status}; the attacker's: GOAWAY ${attackerGoaway ?? 'none'}`,
    );
    expect(large.rstCode).toBe(http2.constants.NGHTTP2_ENHANCE_YOUR_CALM);
    expect(clientGoaway).toBeUndefined();
    expect(after.status).toBe('0');
    // NO_ERROR with the reason in the debug data: node's client then finishes the calls it has in
    // flight (see sendAway in connection-guard.ts).
    expect(attackerGoaway).toBe(http2.constants.NGHTTP2_NO_ERROR);
    expect(attackerReason).toContain('GRPC_MAX_UNFINISHED_REQUEST_BYTES');
  }, 60_000);
});

/** The HTTP/2 client connection preface and an empty SETTINGS frame: all a slot holder sends. */
const PREFACE_AND_SETTINGS = Buffer.concat([
  Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1'),
  Buffer.from([0, 0, 0, 0x04, 0, 0, 0, 0, 0]),
]);
