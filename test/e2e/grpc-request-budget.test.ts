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
import { DOMAIN_B_RULES } from '../helpers/domain-b';

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
  /** Streams still open (not reset by the server) when the attack let go. */
  stillOpen: number;
  lastCloseMs: number;
  calls: number;
  answered: number;
}

/** GRPC_MAX_UNFINISHED_REQUEST_BYTES' default, and what each open call counts in it besides its bytes. */
const BUDGET = 8 * 1024 * 1024;
const STREAM_CHARGE = 16 * 1024;

/**
 * 32 connections × 100 streams of 65,535 of 65,536 bytes, held at least 6 s and until the
 * streams still open fit in the budget (up to 40 s), an ordinary client calling meanwhile.
 */
async function attackRound(port: number, pid: number, client: RlsTestClient): Promise<Round> {
  const round: Round = { peak: residentMb(pid), opened: 0, reset: 0, stillOpen: 0, lastCloseMs: 0, calls: 0, answered: 0 };
  const calls: Promise<unknown>[] = [];
  const result = await partialCalls({
    port,
    connections: 32,
    streamsPerConnection: 100,
    declaredBytes: 65_536,
    sentBytes: 65_535,
    // Each connection first finishes one whole call: proven, like a client's.
    callFirst: true,
    minHoldMs: 6000,
    holdMs: 40_000,
    // GRPC_MAX_REQUEST_RECEIVE_TIME is 1 h here: only the budget resets streams.
    holdUntil: (r) => (r.opened - r.closedByServer) * STREAM_CHARGE <= BUDGET,
    onTick: () => {
      round.peak = Math.max(round.peak, residentMb(pid));
      round.calls++;
      // An ordinary client, on its connection made before the attack; its answers are awaited
      // below, each within its deadline, whatever the machine's speed.
      calls.push(
        client.shouldRateLimit(oneDescriptor('b', { k: 'v' }), 60_000).then(
          () => round.answered++,
          () => undefined,
        ),
      );
    },
  });
  await Promise.all(calls);
  round.peak = Math.max(round.peak, residentMb(pid));
  return {
    ...round,
    opened: result.opened,
    reset: result.closedByServer,
    stillOpen: result.opened - result.closedByServer,
    lastCloseMs: result.lastCloseMs,
  };
}

describe('bytes of unfinished gRPC requests (issue 26, finding 1)', () => {
  test('32 connections × 100 streams of 65,535 of 65,536 bytes, twice: RSS grows far less than their 210 MB, and a second round does not add up', async () => {
    server = await spawnServer(DOMAIN_B_RULES, { LOG_LEVEL: 'WARN', GRPC_MAX_REQUEST_RECEIVE_TIME: '1h' });
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
          `(+${(r.peak - idle).toFixed(0)}); ${r.reset} of ${r.opened} streams reset by the server within ${r.lastCloseMs} ms, ${r.stillOpen} left open; ` +
          `ordinary client ${r.answered} of ${r.calls} answered during the attack`,
      );
    }
    expect(server.proc.exitCode).toBeNull();
    // What the budget guarantees, whatever the machine's speed or the GC's timing: the streams
    // left open fit in it (each counts 16 KiB at least; without the budget all 3,200 stayed).
    // RSS is printed against the idle figure (seen +38 to +113 MB); a second round that held
    // the first's bytes again would add 210 MB, the whole attack.
    for (const r of [first, second]) {
      expect(r.reset).toBeGreaterThan(0);
      expect(r.stillOpen * STREAM_CHARGE).toBeLessThanOrEqual(BUDGET);
      expect(r.peak - idle).toBeLessThan(attackMb);
      expect(r.answered).toBe(r.calls);
    }
    expect(answer.overall_code).toBe('OK');
  }, 120_000);
});
