// Issue 26, finding 2, against the built server (`npm run build` first): raw TCP connections
// that send only the HTTP/2 preface and an empty SETTINGS frame, re-opened when closed, try to
// hold every one of GRPC_MAX_CONNECTIONS (256). A fresh client, and a gRPC health probe that
// connects anew for each check as the kubelet's does, must still be answered, as must a client
// connected before. Printed against the same server's idle answers.
import * as http2 from 'node:http2';
import { afterEach, describe, expect, test } from 'vitest';
import { holdConnectionSlots } from '../abuse/http2-attacks';
import { oneDescriptor, rlsClient } from '../helpers/rls-client';
import { spawnServer, type ServerWithRules } from '../helpers/server-process';
import { DOMAIN_B_RULES } from '../helpers/domain-b';

let server: ServerWithRules | undefined;
afterEach(() => {
  server?.cleanup();
  server = undefined;
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Tally {
  ok: number;
  failed: Record<string, number>;
}

/**
 * Its own connection: grpc-js otherwise shares one subchannel (connection) between the clients of
 * a process that name the same address, and a "fresh" client would ride on an older one's.
 */
const NEW_CONNECTION = { 'grpc.use_local_subchannel_pool': 1 };

/** `count` calls, each on a new client (a new connection), closed after; then as many health checks. */
async function freshClients(port: number, count: number): Promise<{ calls: Tally; probes: Tally }> {
  const calls: Tally = { ok: 0, failed: {} };
  const probes: Tally = { ok: 0, failed: {} };
  const fail = (t: Tally, err: unknown): void => {
    const name = String((err as { code?: number }).code ?? (err as Error).message);
    t.failed[name] = (t.failed[name] ?? 0) + 1;
  };
  for (let i = 0; i < count; i++) {
    const client = rlsClient(`127.0.0.1:${port}`, NEW_CONNECTION);
    try {
      await client.shouldRateLimit(oneDescriptor('b', { k: 'v' }), 3000);
      calls.ok++;
    } catch (err) {
      fail(calls, err);
    }
    client.close();
    const probe = rlsClient(`127.0.0.1:${port}`, NEW_CONNECTION);
    try {
      if ((await probe.healthCheck('')) === 'SERVING') probes.ok++;
      else fail(probes, new Error('not SERVING'));
    } catch (err) {
      fail(probes, err);
    }
    probe.close();
  }
  return { calls, probes };
}

const show = (t: Tally, n: number): string => `${t.ok}/${n} OK${Object.keys(t.failed).length ? ` ${JSON.stringify(t.failed)}` : ''}`;

describe('gRPC connection slots (issue 26, finding 2)', () => {
  test('256 raw connections holding the slots, reopened when closed: fresh clients and probes are still answered', async () => {
    server = await spawnServer(DOMAIN_B_RULES, { LOG_LEVEL: 'WARN' });
    const port = server.grpcPort;
    const idle = await freshClients(port, 7);
    const ordinary = rlsClient(`127.0.0.1:${port}`, NEW_CONNECTION);
    await ordinary.shouldRateLimit(oneDescriptor('b', { k: 'v' }));
    let during: { calls: Tally; probes: Tally } | undefined;
    let ordinaryOk = 0;
    let ordinaryCalls = 0;
    // The slot holders connect from 127.0.0.2, the clients from 127.0.0.1: a full port makes room
    // by closing a connection of the peer that holds the most without a call, which tells them
    // apart whatever the timing (for one shared address, see grpc-envoy-traffic.test.ts). They
    // reopen 1 ms after each close, as fast as a real attacker.
    const holders = holdConnectionSlots({
      port,
      connections: 256,
      localAddress: '127.0.0.2',
      reopenDelayMs: 1,
      holdMs: 9000,
      onTick: async (elapsed) => {
        if (elapsed < 2000 || during !== undefined) return;
        ordinaryCalls++;
        await ordinary.shouldRateLimit(oneDescriptor('b', { k: 'v' }), 3000).then(
          () => ordinaryOk++,
          () => undefined,
        );
        during = await freshClients(port, 15);
      },
    });
    const held = await holders;
    ordinary.close();
    await sleep(100);
    console.log(
      `connection slots (GRPC_MAX_CONNECTIONS 256): idle fresh clients ${show(idle.calls, 7)}, probes ${show(idle.probes, 7)}; ` +
        `with 256 slot holders (${held.opened} opened, ${held.closedByServer} closed by the server): fresh clients ${show(during?.calls ?? { ok: 0, failed: {} }, 15)}, ` +
        `probes ${show(during?.probes ?? { ok: 0, failed: {} }, 15)}; client connected before: ${ordinaryOk}/${ordinaryCalls}`,
    );
    expect(idle.calls.ok).toBe(7);
    expect(during?.calls.ok).toBe(15);
    expect(during?.probes.ok).toBe(15);
    expect(ordinaryOk).toBe(ordinaryCalls);
    expect(server.proc.exitCode).toBeNull();
  }, 90_000);

  test('GRPC_MAX_FIRST_CALL_TIME closes a connection without a finished call, never a client that calls', async () => {
    server = await spawnServer(DOMAIN_B_RULES, { LOG_LEVEL: 'WARN', GRPC_MAX_FIRST_CALL_TIME: '1s' });
    const port = server.grpcPort;
    // One HTTP/2 connection, watched: a gRPC client would reconnect unseen. Its first call
    // finishes (or at least arrives whole) before anything else happens: from then on it is a
    // client, whatever the time its calls take.
    const session = http2.connect(`http://127.0.0.1:${port}`);
    session.on('error', () => {});
    let closedAtCall: number | undefined;
    session.once('close', () => (closedAtCall = ok + 1));
    let ok = 0;
    if ((await call(session)) === '0') ok++;
    // 3 raw connections without a call, each reopened when closed, until the server has closed
    // 3 (each about GRPC_MAX_FIRST_CALL_TIME after it opened) and the client made its 30 calls.
    let calling = true;
    const holders = holdConnectionSlots({ port, connections: 3, holdMs: 30_000, holdUntil: (r) => !calling && r.closedByServer >= 3 });
    for (let i = 1; i < 30 && closedAtCall === undefined; i++) {
      if ((await call(session)) === '0') ok++;
      await sleep(100);
    }
    calling = false;
    const held = await holders;
    session.destroy();
    console.log(
      `GRPC_MAX_FIRST_CALL_TIME=1s: one connection calling every 100 ms: ${ok}/30 OK` +
        `${closedAtCall === undefined ? '' : `, closed by the server at call ${closedAtCall}`}; ` +
        `3 raw connections without a call: ${held.closedByServer} closed by the server (${held.opened} opened)`,
    );
    expect(closedAtCall).toBeUndefined();
    expect(ok).toBe(30);
    // Each raw connection closed about every second, and opened again.
    expect(held.closedByServer).toBeGreaterThanOrEqual(3);
  }, 60_000);
});

/** One ShouldRateLimit call (domain b, k=v) on `session`; its grpc-status, or why none came. */
function call(session: http2.ClientHttp2Session): Promise<string> {
  const entry = Buffer.from([0x0a, 1, 0x6b, 0x12, 1, 0x76]);
  const body = Buffer.concat([Buffer.from([0x0a, 1, 0x62, 0x12, entry.length + 2, 0x0a, entry.length]), entry]);
  const message = Buffer.concat([Buffer.from([0, 0, 0, 0, body.length]), body]);
  return new Promise((resolve) => {
    if (session.closed || session.destroyed) return resolve('closed');
    const stream = session.request({
      ':method': 'POST',
      ':path': '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit',
      'content-type': 'application/grpc',
      te: 'trailers',
    });
    let status = 'no trailers';
    stream.on('trailers', (t: http2.IncomingHttpHeaders) => (status = String(t['grpc-status'])));
    stream.on('error', () => (status = 'error'));
    stream.once('close', () => resolve(status));
    stream.resume();
    stream.end(message);
  });
}
