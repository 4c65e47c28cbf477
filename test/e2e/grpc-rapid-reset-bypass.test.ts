// Issue 26, finding 6, against the built server (`npm run build` first), with raw HTTP/2
// (node:http2): the rapid-reset allowance (GRPC_MAX_RESET_BURST 100, then
// GRPC_MAX_RESETS_PER_SECOND 20) holds on every connection whatever the headers say, and
// reconnecting does not renew it. Each test prints what it measured against the plain attack.
import * as http2 from 'node:http2';
import { afterEach, describe, expect, test } from 'vitest';
import { closedForResets, rapidReset, type RapidResetOptions, type RapidResetResult } from '../abuse/http2-attacks';
import { oneDescriptor, rlsClient } from '../helpers/rls-client';
import { spawnServer, type ServerWithRules } from '../helpers/server-process';
import { DOMAIN_B_RULES, domainBRequest } from '../helpers/domain-b';
import { within } from '../harness/wait';

let server: ServerWithRules | undefined;
afterEach(() => {
  server?.cleanup();
  server = undefined;
});

/** The calls the server says it processed before its GOAWAY (client streams are odd ids). */
function processed(r: RapidResetResult): number | undefined {
  return r.goawayLastStreamId === undefined ? undefined : (r.goawayLastStreamId + 1) / 2;
}

interface Round extends RapidResetResult {
  /** How long the round took, by this test's clock. */
  seconds: number;
}

/** `rounds` connections one after the other, each resetting up to 3,000 calls. */
async function attack(port: number, rounds: number, extra: Partial<RapidResetOptions>): Promise<Round[]> {
  const results: Round[] = [];
  for (let i = 0; i < rounds; i++) {
    const t0 = performance.now();
    const r = await rapidReset({ port, calls: 3000, request: domainBRequest(), timeoutMs: 20_000, ...extra });
    results.push({ ...r, seconds: (performance.now() - t0) / 1000 });
  }
  return results;
}

function describeRounds(label: string, rounds: RapidResetResult[]): string {
  return `${label}: GOAWAY ${rounds.map((r) => r.goawayCode ?? 'none').join('/')} after ${rounds.map((r) => processed(r) ?? '?').join(', ')} calls (sent ${rounds.map((r) => r.resets).join(', ')})`;
}

// GRPC_MAX_RESETS_PER_SECOND is 1 here, so that what the rate gives back over a slow round stays
// small beside the burst, whatever the machine's speed; the bound adds it by this test's clock.
const RATE = { LOG_LEVEL: 'WARN', GRPC_MAX_RESETS_PER_SECOND: '1' };

/**
 * The most calls one connection can make the server process before it closes the connection,
 * whatever the machine's speed: GRPC_MAX_RESET_BURST (100), what GRPC_MAX_RESETS_PER_SECOND gave
 * back over the round (by this test's clock), the streams in flight (GRPC_MAX_CONCURRENT_STREAMS,
 * 100), and the rest of the read in which the guard said GOAWAY, which nghttp2 processes
 * whole: node reads up to 64 KiB at once, and one call of this attacker takes at least 36 bytes
 * (HEADERS with indexed fields, 9 + 5; DATA, 9 + 5 + 13, unless reset before it; RST_STREAM, 13).
 * Measured: 50-400, at 3,000 sent.
 */
const mostCalls = (r: Round): number => 100 + Math.ceil(r.seconds * 1) + 100 + Math.ceil(65_536 / 36);
describe('HTTP/2 rapid reset: the allowance holds whatever the client does (issue 26, finding 6)', () => {
  test('grpc-timeout: 1m on every call, and resets before the message: each connection closed within the allowance', async () => {
    server = await spawnServer(DOMAIN_B_RULES, RATE);
    const port = server.grpcPort;
    // The control: the plain attack (a whole call, then RST_STREAM), on one connection.
    const plain = await attack(port, 1, {});
    const withTimeout = await attack(port, 2, { headers: { 'grpc-timeout': '1m' } });
    const beforeMessage = await attack(port, 2, { resetBeforeMessage: true });
    console.log(describeRounds('plain (control)', plain));
    console.log(describeRounds('grpc-timeout: 1m', withTimeout));
    console.log(describeRounds('reset before the message', beforeMessage));
    for (const r of [...plain, ...withTimeout, ...beforeMessage]) {
      expect(r.closedByServer).toBe(true);
      expect(closedForResets(r)).toBe(true);
      expect(processed(r)).toBeLessThanOrEqual(mostCalls(r));
    }
    const client = rlsClient(`127.0.0.1:${port}`);
    const after = await client.shouldRateLimit(oneDescriptor('b', { k: 'v' }));
    client.close();
    expect(after.overall_code).toBe('OK');
  }, 120_000);

  test('reconnecting does not renew the allowance: the peer keeps what it spent', async () => {
    server = await spawnServer(DOMAIN_B_RULES, RATE);
    const t0 = performance.now();
    // Each call reset before its message. One call at a time (a PING's round trip
    // after each reset): what the server processed is
    // what its guard counted, not what a read of the machine's speed held. Reconnecting until
    // the guard has closed one connection, then until it has closed 4 more. At most 16.
    const rounds: Round[] = [];
    const byGuard = (r: Round): boolean => r.goawayCode !== http2.constants.NGHTTP2_INTERNAL_ERROR && closedForResets(r);
    let flagged = -1;
    for (let i = 0; i < 16 && (flagged < 0 || rounds.slice(flagged + 1).filter(byGuard).length < 4); i++) {
      rounds.push(...(await attack(server.grpcPort, 1, { noFirstCall: true, resetBeforeMessage: true, oneAtATime: true })));
      if (flagged < 0 && byGuard(rounds[i] as Round)) flagged = i;
    }
    const elapsedS = (performance.now() - t0) / 1000;
    console.log(describeRounds('no finished call, reconnecting', rounds));
    // After the guard closed a connection, the next ones get only what the rate (1/s) gave back
    // since, plus the calls in flight at each GOAWAY. Without a per-peer allowance each
    // reconnection started again with 100.
    const later = rounds
      .slice(flagged + 1)
      .filter(byGuard)
      .map((r) => processed(r) ?? r.resets);
    console.log(
      `after the guard closed connection ${flagged + 1}: ${later.join(', ')} calls on the next ones it closed; ${elapsedS.toFixed(1)} s in all`,
    );
    expect(flagged).toBeGreaterThanOrEqual(0);
    expect(later).toHaveLength(4);
    for (const r of rounds) expect(r.closedByServer).toBe(true);
    // What the rate gave back over the whole test stays under the burst: the comparison holds.
    expect(elapsedS).toBeLessThan(100);
    expect(Math.max(...later)).toBeLessThan(100);
    // The first connection had the whole burst.
    expect(processed(rounds[0] as Round)).toBeGreaterThanOrEqual(100);
  }, 120_000);
});

// CI on a quiet machine (stop 31): two grpc-js clients of one address share one connection (the
// global subchannel pool), as every caller behind one Envoy shares Envoy's. When one of them
// resets calls past the allowance, the guard closes that connection; a GOAWAY with an error code
// makes node's HTTP/2 client destroy the session at once, failing the other caller's calls in
// flight (RESOURCE_EXHAUSTED). The guard must close the connection without failing them.
describe('a connection closed for resets (stop 31)', () => {
  test('the other calls in flight on it are still answered, and the GOAWAY says why', async () => {
    server = await spawnServer(DOMAIN_B_RULES, { LOG_LEVEL: 'WARN' });
    const session = http2.connect(`http://127.0.0.1:${server.grpcPort}`);
    session.on('error', () => {});
    let goaway: { code: number; lastStreamId: number; data: string } | undefined;
    session.once('goaway', (code: number, lastStreamId: number, data?: Buffer) => {
      goaway = { code, lastStreamId, data: data?.toString('latin1') ?? '' };
    });
    await new Promise((resolve) => session.once('remoteSettings', resolve));
    const message = Buffer.concat([Buffer.from([0, 0, 0, 0, domainBRequest().length]), domainBRequest()]);
    const headers = {
      ':method': 'POST',
      ':path': '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit',
      'content-type': 'application/grpc',
      te: 'trailers',
    };
    // Three innocent calls, each with the first half of its message sent: in flight, by the
    // client's own doing, until the flood below is over.
    const innocent = Array.from({ length: 3 }, () => {
      const stream = session.request(headers, { endStream: false });
      let status: string | undefined;
      let bytes = 0;
      stream.on('error', () => {});
      stream.on('trailers', (t: http2.IncomingHttpHeaders) => (status = String(t['grpc-status'])));
      stream.on('data', (chunk: Buffer) => (bytes += chunk.length));
      stream.write(message.subarray(0, 8));
      const closed = new Promise<void>((resolve) => stream.once('close', () => resolve()));
      return { stream, closed, status: () => status, bytes: () => bytes };
    });
    await new Promise((resolve) => session.ping(resolve));
    // The flood on the same connection: calls sent and reset at once, until the server says GOAWAY
    // (the allowance is 100 at once), at most 2,000.
    for (let i = 0; i < 2000 && goaway === undefined && !session.destroyed && !session.closed; i++) {
      const s = session.request(headers, { endStream: false });
      s.on('error', () => {});
      s.end(message);
      s.close(http2.constants.NGHTTP2_CANCEL);
      if (i % 50 === 49) await new Promise((resolve) => session.ping(resolve));
    }
    await within(5000, () => goaway !== undefined, 'the GOAWAY');
    // The innocent calls finish their messages after the GOAWAY, as a slow client may.
    for (const c of innocent) if (!c.stream.destroyed) c.stream.end(message.subarray(8));
    await Promise.race([Promise.all(innocent.map((c) => c.closed)), new Promise((r) => setTimeout(r, 10_000))]);
    session.destroy();
    const statuses = innocent.map((c) => c.status() ?? `none (${c.stream.rstCode ?? 'no reset'})`);
    console.log(`flood closed the connection: GOAWAY ${JSON.stringify(goaway)}; the innocent calls: ${statuses.join(', ')}`);
    expect(goaway?.data).toContain('rapid reset');
    expect(goaway?.lastStreamId).toBeGreaterThanOrEqual(5);
    expect(statuses).toEqual(['0', '0', '0']);
    for (const c of innocent) expect(c.bytes()).toBeGreaterThan(5);
  }, 60_000);
});
