// Issue 26, finding 2, against the built server (`npm run build` first): raw TCP connections
// that send only the HTTP/2 preface and an empty SETTINGS frame, re-opened when closed, try to
// hold every one of GRPC_MAX_CONNECTIONS (256). A fresh client, and a gRPC health probe that
// connects anew for each check as the kubelet's does, must still be answered, as must a client
// connected before. Printed against the same server's idle answers.
import { afterEach, describe, expect, test } from 'vitest';
import { holdConnectionSlots } from '../abuse/http2-attacks';
import { oneDescriptor, rlsClient } from '../helpers/rls-client';
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
    server = await spawnServer(RULES, { LOG_LEVEL: 'WARN' });
    const port = server.grpcPort;
    const idle = await freshClients(port, 7);
    const ordinary = rlsClient(`127.0.0.1:${port}`, NEW_CONNECTION);
    await ordinary.shouldRateLimit(oneDescriptor('b', { k: 'v' }));
    let during: { calls: Tally; probes: Tally } | undefined;
    let ordinaryOk = 0;
    let ordinaryCalls = 0;
    const holders = holdConnectionSlots({
      port,
      connections: 256,
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
});
