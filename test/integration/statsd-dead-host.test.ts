// A statsd that is not there (connection refused) or that stops reading (a loopback stand-in for
// a blackhole) must cost nothing on the request path, and what waits to be sent stays bounded.
import { createServer, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createStatsdTransport, MAX_PENDING_BYTES, type StatsdTransport } from '../../src/metrics/statsd-transport';
import { freePort } from '../harness/free-port';
import { waitUntil } from '../harness/wait';
import { oneDescriptor } from '../helpers/rls-client';
import { startTestApp, type TestApp } from '../helpers/test-app';

const MiB = 1024 * 1024;

/** Accepts connections and never reads from them: the sender's buffers fill and stay full. */
async function stalledStatsd(): Promise<{ server: Server; port: number; connections: Socket[] }> {
  const connections: Socket[] = [];
  const server = createServer({ pauseOnConnect: true }, (socket) => connections.push(socket));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return { server, port: address.port, connections };
}

let cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.reverse()) await c();
  cleanups = [];
});

function sendMany(transport: StatsdTransport, totalBytes: number): void {
  const chunk = 'ratelimit.service.rate_limit.d.k.total_hits:1|c\n'.repeat(1300); // ~64 KiB
  for (let sent = 0; sent < totalBytes; sent += chunk.length) transport.send(chunk);
}

describe('the statsd transport stays bounded when statsd does not take what it is sent', () => {
  it('TCP to a port where nothing listens: at most 4 MiB is kept, the rest is dropped', async () => {
    const transport = createStatsdTransport({ host: '127.0.0.1', port: await freePort(), protocol: 'tcp' });
    cleanups.push(() => transport.close());
    sendMany(transport, 64 * MiB);
    expect(transport.droppedBytes()).toBeGreaterThanOrEqual(64 * MiB - MAX_PENDING_BYTES - 64 * 1024);
  });

  it('TCP to a statsd that accepts and never reads: the socket buffer stops at 4 MiB (plus what the kernel holds)', async () => {
    const stalled = await stalledStatsd();
    cleanups.push(() => {
      for (const s of stalled.connections) s.destroy();
      return new Promise<void>((resolve) => stalled.server.close(() => resolve()));
    });
    const transport = createStatsdTransport({ host: '127.0.0.1', port: stalled.port, protocol: 'tcp' });
    cleanups.push(() => transport.close());
    await waitUntil('the connection', () => stalled.connections.length === 1, { timeoutMs: 20_000 });
    // Let the transport see its socket connected.
    await new Promise((resolve) => setTimeout(resolve, 50));
    const heapBefore = process.memoryUsage().heapUsed + process.memoryUsage().external;
    sendMany(transport, 64 * MiB);
    const heapAfter = process.memoryUsage().heapUsed + process.memoryUsage().external;
    // Loopback kernel buffers take a few MiB at most; everything else is dropped, not buffered.
    expect(transport.droppedBytes()).toBeGreaterThan(40 * MiB);
    expect(heapAfter - heapBefore).toBeLessThan(32 * MiB);
  });

  it('close() returns within its bound even when statsd never reads', async () => {
    const stalled = await stalledStatsd();
    cleanups.push(() => {
      for (const s of stalled.connections) s.destroy();
      return new Promise<void>((resolve) => stalled.server.close(() => resolve()));
    });
    const transport = createStatsdTransport({ host: '127.0.0.1', port: stalled.port, protocol: 'tcp' });
    await waitUntil('the connection', () => stalled.connections.length === 1, { timeoutMs: 20_000 });
    sendMany(transport, 16 * MiB);
    const started = Date.now();
    await transport.close();
    // close() gives up after 1 s (CLOSE_WAIT_MS); without that bound it never returns. A busy
    // machine may fire the timer late, so the check is 10 times the bound, not a few hundred ms.
    expect(Date.now() - started).toBeLessThan(10_000);
  });
});

describe('a dead statsd host costs the request path nothing', () => {
  const RULES = {
    'd.yaml': 'domain: d\ndescriptors:\n  - key: k\n    detailed_metric: true\n    rate_limit: { unit: hour, requests_per_unit: 1000000 }\n',
  };

  let seq = 0;
  /** Latencies of `n` sequential calls, each with its own detailed-metric path (a new stat each). */
  async function timesMs(t: TestApp, n: number): Promise<number[]> {
    const times: number[] = [];
    for (let i = 0; i < n; i++) {
      const started = performance.now();
      await t.client.shouldRateLimit(oneDescriptor('d', { k: `v${seq++}` }));
      times.push(performance.now() - started);
    }
    return times;
  }

  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;

  async function app(env: Record<string, string>): Promise<TestApp> {
    const t = await startTestApp(RULES, env);
    cleanups.push(() => t.stop());
    await timesMs(t, 50); // warm-up
    return t;
  }

  it('with statsd refused, or accepting and never reading, the median call takes as long as with statsd off', async () => {
    const stalled = await stalledStatsd();
    cleanups.push(() => {
      for (const s of stalled.connections) s.destroy();
      return new Promise<void>((resolve) => stalled.server.close(() => resolve()));
    });
    const fast = { STATS_FLUSH_INTERVAL: '5ms', USE_STATSD: 'true', STATSD_HOST: '127.0.0.1' };
    const off = await app({ USE_STATSD: 'false' });
    const refused = await app({ ...fast, STATSD_PORT: String(await freePort()) });
    const neverReads = await app({ ...fast, STATSD_PORT: String(stalled.port) });
    const udpNowhere = await app({ ...fast, STATSD_PROTOCOL: 'udp', STATSD_PORT: String(await freePort()) });
    const apps = { off, refused, 'never reads': neverReads, 'udp to nowhere': udpNowhere };
    const times: Record<string, number[]> = { off: [], refused: [], 'never reads': [], 'udp to nowhere': [] };
    // Interleaved rounds, so that a burst of load from elsewhere on the machine hits all alike.
    for (let round = 0; round < 8; round++) {
      for (const [what, t] of Object.entries(apps)) times[what]!.push(...(await timesMs(t, 50)));
    }
    const baseline = median(times.off!);
    for (const what of ['refused', 'never reads', 'udp to nowhere']) {
      const m = median(times[what]!);
      // Generous: a loaded 2-core machine; what matters is no connect or send wait per call.
      expect(m, `${what}: median ${m.toFixed(3)} ms, statsd off ${baseline.toFixed(3)} ms`).toBeLessThan(baseline * 2 + 1);
      expect(apps[what as keyof typeof apps].app.statsd, what).toBeDefined();
    }
    expect(stalled.connections.length).toBeGreaterThanOrEqual(1);
  });
});
