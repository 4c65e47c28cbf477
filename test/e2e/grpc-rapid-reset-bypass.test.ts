// Issue 26, finding 6, against the built server (`npm run build` first), with raw HTTP/2
// (node:http2): the rapid-reset allowance (GRPC_MAX_RESET_BURST 100, then
// GRPC_MAX_RESETS_PER_SECOND 20) holds on every connection whatever the headers say, and
// reconnecting does not renew it. Each test prints what it measured against the plain attack.
import * as http2 from 'node:http2';
import { afterEach, describe, expect, test } from 'vitest';
import { rapidReset, type RapidResetOptions, type RapidResetResult } from '../abuse/http2-attacks';
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

/** RATELIMIT request for domain b, k=v (protobuf bytes). */
function request(): Buffer {
  const entry = Buffer.concat([Buffer.from([0x0a, 1]), Buffer.from('k'), Buffer.from([0x12, 1]), Buffer.from('v')]);
  const descriptor = Buffer.concat([Buffer.from([0x0a, entry.length]), entry]);
  return Buffer.concat([Buffer.from([0x0a, 1]), Buffer.from('b'), Buffer.from([0x12, descriptor.length]), descriptor]);
}

/** The calls the server says it processed before its GOAWAY (client streams are odd ids). */
function processed(r: RapidResetResult): number | undefined {
  return r.goawayLastStreamId === undefined ? undefined : (r.goawayLastStreamId + 1) / 2;
}

/** `rounds` connections one after the other, each resetting up to 3,000 calls. */
async function attack(port: number, rounds: number, extra: Partial<RapidResetOptions>): Promise<RapidResetResult[]> {
  const results: RapidResetResult[] = [];
  for (let i = 0; i < rounds; i++) results.push(await rapidReset({ port, calls: 3000, request: request(), timeoutMs: 20_000, ...extra }));
  return results;
}

function describeRounds(label: string, rounds: RapidResetResult[]): string {
  return `${label}: GOAWAY ${rounds.map((r) => r.goawayCode ?? 'none').join('/')} after ${rounds.map((r) => processed(r) ?? '?').join(', ')} calls (sent ${rounds.map((r) => r.resets).join(', ')})`;
}

// GRPC_MAX_RESET_BURST (100) plus GRPC_MAX_RESETS_PER_SECOND (20) for each second (a few here),
// plus the calls in flight when the server says GOAWAY, at most GRPC_MAX_CONCURRENT_STREAMS (100).
const MOST_CALLS_ON_ONE_CONNECTION = 300;

describe('HTTP/2 rapid reset: the allowance holds whatever the client does (issue 26, finding 6)', () => {
  test('grpc-timeout: 1m on every call, and resets before the message: each connection closed within the allowance', async () => {
    server = await spawnServer(RULES, { LOG_LEVEL: 'WARN' });
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
      expect([http2.constants.NGHTTP2_ENHANCE_YOUR_CALM, http2.constants.NGHTTP2_INTERNAL_ERROR]).toContain(r.goawayCode);
      expect(processed(r)).toBeLessThanOrEqual(MOST_CALLS_ON_ONE_CONNECTION);
    }
    const client = rlsClient(`127.0.0.1:${port}`);
    const after = await client.shouldRateLimit(oneDescriptor('b', { k: 'v' }));
    client.close();
    expect(after.overall_code).toBe('OK');
  }, 120_000);

  test('reconnecting does not renew the allowance: the peer keeps what it spent', async () => {
    server = await spawnServer(RULES, { LOG_LEVEL: 'WARN' });
    const rounds = await attack(server.grpcPort, 6, {});
    const counts = rounds.map((r) => processed(r) ?? r.resets);
    console.log(describeRounds('plain, reconnecting 6 times', rounds));
    // The first connection spends the burst; the next ones only what the rate gave back since,
    // plus the calls in flight at each GOAWAY. Without a per-peer allowance each reconnection
    // started again with 100.
    const later = counts.slice(1);
    const total = later.reduce((a, b) => a + b, 0);
    console.log(`after the first connection: ${total} calls on ${later.length} connections (${(total / later.length).toFixed(0)} each)`);
    for (const r of rounds) expect(r.closedByServer).toBe(true);
    expect(Math.max(...later)).toBeLessThan(100);
  }, 120_000);
});
