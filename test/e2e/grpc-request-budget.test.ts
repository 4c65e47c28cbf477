// Issue 26, finding 1, against the built server (`npm run build` first), with raw HTTP/2
// (node:http2): streams that each send a 5-byte prefix declaring 65,536 bytes, then 65,535 of
// them, and never finish. GRPC_MAX_UNFINISHED_REQUEST_BYTES (8 MiB) bounds what they make the
// process hold, the memory is given back (the same attack again takes no more), and an
// ordinary client is answered meanwhile. Printed against the same server's idle figures.
import { afterEach, describe, expect, test } from 'vitest';
import { partialCalls } from '../abuse/http2-attacks';
import { residentMb } from '../helpers/process-memory';
import { oneDescriptor, rlsClient, type RlsTestClient } from '../helpers/rls-client';
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

interface Round {
  peak: number;
  opened: number;
  reset: number;
  lastCloseMs: number;
  calls: number;
  answered: number;
}

/** 32 connections × 100 streams of 65,535 of 65,536 bytes, held 6 s, an ordinary client calling meanwhile. */
async function attackRound(port: number, pid: number, client: RlsTestClient): Promise<Round> {
  const round: Round = { peak: residentMb(pid), opened: 0, reset: 0, lastCloseMs: 0, calls: 0, answered: 0 };
  const result = await partialCalls({
    port,
    connections: 32,
    streamsPerConnection: 100,
    declaredBytes: 65_536,
    sentBytes: 65_535,
    // Each connection first earns its 100 streams with one whole call.
    callFirst: true,
    // Under GRPC_MAX_REQUEST_RECEIVE_TIME (10 s): only the budget resets streams meanwhile.
    holdMs: 6000,
    onTick: () => {
      round.peak = Math.max(round.peak, residentMb(pid));
      round.calls++;
      // An ordinary client, on its connection made before the attack.
      void client.shouldRateLimit(oneDescriptor('b', { k: 'v' }), 5000).then(
        () => round.answered++,
        () => undefined,
      );
    },
  });
  await sleep(1000);
  round.peak = Math.max(round.peak, residentMb(pid));
  return { ...round, opened: result.opened, reset: result.closedByServer, lastCloseMs: result.lastCloseMs };
}

describe('bytes of unfinished gRPC requests (issue 26, finding 1)', () => {
  test('32 connections × 100 streams of 65,535 of 65,536 bytes, twice: RSS grows far less than their 210 MB, and a second round does not add up', async () => {
    server = await spawnServer(RULES, { LOG_LEVEL: 'WARN' });
    const pid = server.proc.pid as number;
    const client = rlsClient(`127.0.0.1:${server.grpcPort}`);
    await client.shouldRateLimit(oneDescriptor('b', { k: 'v' }));
    await sleep(500);
    const idle = residentMb(pid);
    const first = await attackRound(server.grpcPort, pid, client);
    // The same attack again: what the first one took was given back (to the allocator and V8,
    // which keep it for reuse rather than return it to the system), so the second takes no more.
    const second = await attackRound(server.grpcPort, pid, client);
    const fresh = rlsClient(`127.0.0.1:${server.grpcPort}`);
    const answer = await fresh.shouldRateLimit(oneDescriptor('b', { k: 'v' }));
    fresh.close();
    client.close();
    const attackMb = (first.opened * 65_540) / 1e6;
    for (const [i, r] of [first, second].entries()) {
      console.log(
        `unfinished requests, round ${i + 1}, 32 × 100 streams (${attackMb.toFixed(0)} MB sent): RSS idle ${idle.toFixed(0)} MB, peak ${r.peak.toFixed(0)} MB ` +
          `(+${(r.peak - idle).toFixed(0)}); ${r.reset} of ${r.opened} streams reset by the server within ${r.lastCloseMs} ms; ` +
          `ordinary client ${r.answered} of ${r.calls} answered during the attack`,
      );
    }
    expect(server.proc.exitCode).toBeNull();
    // 8 MiB of budget, the streams themselves and the garbage between two GCs (seen +84 MB); was
    // +243 MB, and still +243 MB after the streams were gone. The second round may find the
    // first's garbage not yet collected (an idle process does not collect; seen +113 MB), but
    // what the first held is not held twice: 3,200 streams × 64 KiB more would be +330 MB.
    expect(first.peak - idle).toBeLessThan(130);
    expect(second.peak - idle).toBeLessThan(160);
    for (const r of [first, second]) {
      expect(r.reset).toBeGreaterThan(0);
      expect(r.answered).toBe(r.calls);
    }
    expect(answer.overall_code).toBe('OK');
  }, 120_000);
});
