// Issue 26, finding 9 (memory): with the shipped defaults and the image's Node flags, no attack
// on what the process keeps in memory takes it past 80 % of the shipped pod's memory limit.
// Before: the memory backend under ever-new keys reached 269 MB, sliding_log with hits_addend
// 1000 × 64 descriptors 377 MB, the policy's memory store with 111,582 clients sending 4,000 B
// values 324 MB, and a ghz soak of two new descriptors a request 443 MB, against a limit of 256 Mi. Each case drives a fixed amount of work against the
// built server (a real process, memory backend, default settings) and compares its peak
// resident memory (VmHWM) with the bound; the server's idle RSS is printed beside it.
import * as grpc from '@grpc/grpc-js';
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, test } from 'vitest';
import { BOXING_POLICY, encodeRequest, pool, rawCall, type Descriptor } from '../abuse/attacks';
import { POD_BOUND_BYTES, shippedPodLimitMib } from '../helpers/pod-memory';
import { spawnServer, type ServerProcess } from '../helpers/server-process';

const MIB = 1024 * 1024;

const BOUND_BYTES = POD_BOUND_BYTES();

function memoryOf(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN) * 1024;
  return { rss: kb('VmRSS'), peak: kb('VmHWM') };
}

const RULES = {
  'abuse.yaml': `domain: abuse
descriptors:
  - key: user
    rate_limit: {unit: day, requests_per_unit: 1000}
  - key: log
    rate_limit: {unit: hour, requests_per_unit: 1000, algorithm: sliding_log}
`,
  'boxed.yaml': BOXING_POLICY,
};

let server: ServerProcess | undefined;
afterEach(() => server?.cleanup());

/** Starts the server, warms it with one call, runs `work`, and returns idle RSS and the peak. */
async function measure(label: string, work: (client: grpc.Client) => Promise<Record<string, number>>): Promise<number> {
  server = await spawnServer(RULES, {});
  const pid = server.proc.pid as number;
  const client = new grpc.Client(`127.0.0.1:${server.grpcPort}`, grpc.credentials.createInsecure());
  try {
    expect(await rawCall(client, encodeRequest('abuse', [{ entries: [['user', 'warm']] }]))).toBe('OK');
    const idle = memoryOf(pid).rss;
    const answers = await work(client);
    const { rss, peak } = memoryOf(pid);
    console.log(
      `${label}: peak RSS ${(peak / MIB).toFixed(0)} MiB (now ${(rss / MIB).toFixed(0)}), idle ${(idle / MIB).toFixed(0)} MiB; ` +
        `bound ${(BOUND_BYTES / MIB).toFixed(0)} MiB (80 % of the shipped ${shippedPodLimitMib()} Mi); answers ${JSON.stringify(answers)}`,
    );
    expect(answers).toEqual({ OK: expect.any(Number) as number });
    return peak;
  } finally {
    client.close();
  }
}

function tally(): { answers: Record<string, number>; add(a: string): void } {
  const answers: Record<string, number> = {};
  return { answers, add: (a) => void (answers[a] = (answers[a] ?? 0) + 1) };
}

describe('memory bounds against the shipped pod limit (memory backend, default settings, the image’s Node flags)', () => {
  test('ever-new keys: 8,000 requests × 64 new counters (512,000, past MEMORY_MAX_BYTES)', async () => {
    const peak = await measure('memory backend, 8,000 × 64 ever-new keys', async (client) => {
      const t = tally();
      const stamp = Date.now();
      await pool(8000, 8, async (i) => {
        const descriptors: Descriptor[] = Array.from({ length: 64 }, (_, j) => ({ entries: [['user', `${stamp}-${i}-${j}`]] }));
        t.add(await rawCall(client, encodeRequest('abuse', descriptors)));
      });
      return t.answers;
    });
    expect(peak).toBeLessThan(BOUND_BYTES);
  }, 300_000);

  test('sliding_log: 800 requests × 64 new counters × hits_addend 1000', async () => {
    const peak = await measure('sliding_log, 800 × 64 × hits_addend 1000', async (client) => {
      const t = tally();
      const stamp = Date.now();
      await pool(800, 4, async (i) => {
        const descriptors: Descriptor[] = Array.from({ length: 64 }, (_, j) => ({ entries: [['log', `${stamp}-${i}-${j}`]] }));
        t.add(await rawCall(client, encodeRequest('abuse', descriptors, 1000)));
      });
      return t.answers;
    });
    expect(peak).toBeLessThan(BOUND_BYTES);
  }, 300_000);

  test('churn: 80,000 requests of two new descriptors each, 64 at a time (the soak of the issue, fixed in size)', async () => {
    const peak = await measure('memory backend churn, 80,000 × 2 new descriptors', async (client) => {
      const t = tally();
      const stamp = Date.now();
      await pool(80_000, 64, async (i) => {
        const descriptors: Descriptor[] = [{ entries: [['user', `${stamp}-a-${i}`]] }, { entries: [['user', `${stamp}-b-${i}`]] }];
        t.add(await rawCall(client, encodeRequest('abuse', descriptors)));
      });
      return t.answers;
    });
    expect(peak).toBeLessThan(BOUND_BYTES);
  }, 400_000);

  test('policy memory store: 111,582 clients sending 4,000 B values', async () => {
    const peak = await measure('policy (memory), 111,582 clients × 4,000 B', async (client) => {
      const t = tally();
      const pad = 'p'.repeat(4000);
      await pool(111_582, 16, async (i) => {
        const entries: [string, string][] = [
          ['user', `${i}-${pad}`],
          ['x', 'y'],
        ];
        t.add(await rawCall(client, encodeRequest('boxed', [{ entries }])));
      });
      return t.answers;
    });
    expect(peak).toBeLessThan(BOUND_BYTES);
  }, 400_000);
});
