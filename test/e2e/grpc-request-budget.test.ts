// Issue 26, finding 1, against the built server (`npm run build` first), with raw HTTP/2
// (node:http2): streams that each send a 5-byte prefix declaring 65,536 bytes, then 65,535 of
// them, and never finish. GRPC_MAX_UNFINISHED_REQUEST_BYTES (16 MiB) bounds what they make the
// process hold, memory comes back once they are gone, and an ordinary client is answered
// meanwhile. Printed against the same server's idle figures.
import { afterEach, describe, expect, test } from 'vitest';
import { partialCalls } from '../abuse/http2-attacks';
import { residentMb } from '../helpers/process-memory';
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

describe('bytes of unfinished gRPC requests (issue 26, finding 1)', () => {
  test('32 connections × 100 streams of 65,535 of 65,536 bytes: RSS grows far less than their 210 MB, and comes back', async () => {
    server = await spawnServer(RULES, { LOG_LEVEL: 'WARN' });
    const pid = server.proc.pid as number;
    const client = rlsClient(`127.0.0.1:${server.grpcPort}`);
    await client.shouldRateLimit(oneDescriptor('b', { k: 'v' }));
    await sleep(500);
    const idle = residentMb(pid);
    let peak = idle;
    let calls = 0;
    let answered = 0;
    const result = await partialCalls({
      port: server.grpcPort,
      connections: 32,
      streamsPerConnection: 100,
      declaredBytes: 65_536,
      sentBytes: 65_535,
      // Under GRPC_MAX_REQUEST_RECEIVE_TIME (10 s): only the budget resets streams meanwhile.
      holdMs: 6000,
      onTick: () => {
        peak = Math.max(peak, residentMb(pid));
        calls++;
        // An ordinary client, on its connection made before the attack.
        void client.shouldRateLimit(oneDescriptor('b', { k: 'v' }), 5000).then(
          () => answered++,
          () => undefined,
        );
      },
    });
    await sleep(1000);
    peak = Math.max(peak, residentMb(pid));
    // After: the attacker's connections are gone; wait (bounded) for the memory to come back.
    let after = residentMb(pid);
    for (let i = 0; i < 30 && after - idle > 40; i++) {
      await sleep(500);
      after = residentMb(pid);
    }
    const fresh = rlsClient(`127.0.0.1:${server.grpcPort}`);
    const answer = await fresh.shouldRateLimit(oneDescriptor('b', { k: 'v' }));
    fresh.close();
    client.close();
    const attackMb = (result.opened * 65_540) / 1e6;
    console.log(
      `unfinished requests, 32 × 100 streams (${attackMb.toFixed(0)} MB sent): RSS idle ${idle.toFixed(0)} MB, peak ${peak.toFixed(0)} MB ` +
        `(+${(peak - idle).toFixed(0)}), after ${after.toFixed(0)} MB; ${result.closedByServer} of ${result.opened} streams reset by the server ` +
        `within ${result.lastCloseMs} ms; ordinary client ${answered} of ${calls} answered during the attack`,
    );
    expect(server.proc.exitCode).toBeNull();
    // 16 MiB of budget, plus the streams themselves and the garbage between two GCs; was +247 MB.
    expect(peak - idle).toBeLessThan(100);
    expect(after - idle).toBeLessThan(40);
    expect(result.closedByServer).toBeGreaterThan(0);
    expect(answered).toBe(calls);
    expect(answer.overall_code).toBe('OK');
  }, 90_000);
});
