import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { SLICE_MS } from '../../src/config/xds/time-slices';

import { trackDir } from '../harness/cleanup-registry';
import { sleep, waitUntil } from '../harness/wait';
import { oneDescriptor } from '../helpers/rls-client';
import { startTestApp, type TestApp } from '../helpers/test-app';
import { startXdsServer, xdsServerBinary, type RateLimitConfigJson, type XdsServer } from '../helpers/xds-server';

// Issue 18 findings 4 and 9, against the go-control-plane test server (test/xds-server).
// The server runs in this process (startTestApp), so the event loop measured here is its own,
// and a probe call's latency is what a caller of this process would see.

/** A small resource, about the size of the (0.31 MiB for 1,000). */
const small = (i: number, limit = 1): RateLimitConfigJson => ({
  name: `res-${String(i).padStart(5, '0')}`,
  domain: `domain-${i}`,
  descriptors: [
    { key: 'remote_address', rate_limit: { unit: 'SECOND', requests_per_unit: limit } },
    { key: 'path', value: '/api/*', rate_limit: { unit: 'MINUTE', requests_per_unit: 100, name: 'api' }, shadow_mode: true },
  ],
});

const FAST_RETRY = {
  CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL: '100ms',
  XDS_CLIENT_BACKOFF_INITIAL_INTERVAL: '100ms',
  XDS_CLIENT_BACKOFF_MAX_INTERVAL: '500ms',
};

/** Rule loads so far (cheap to read, unlike /rlconfig with thousands of rules, so polling it does not stall the loop itself). */
async function loads(t: TestApp): Promise<number> {
  const text = await t.app.metrics.registry.getSingleMetricAsString('ratelimit_service_config_load_success');
  return Number(/ratelimit_service_config_load_success (\d+)/.exec(text)?.[1] ?? 'NaN');
}

async function rlconfig(t: TestApp): Promise<string> {
  return (await fetch(`${t.debugUrl}/rlconfig`)).text();
}

interface Stall {
  /**
   * The same measure over 1 s just before the push, idle but for the probe, and again after the
   * load, as long as it took, with this process computing in slices: what the machine alone costs.
   */
  readonly controlStallMs: number;
  /** The worst probe call during the second control. */
  readonly controlProbeMs: number;
  readonly tookMs: number;
  readonly stallMs: number;
  readonly probes: number;
  readonly worstProbeMs: number;
}

/**
 * Pushes a snapshot and measures, until it is loaded: the worst event-loop delay, and an
 * ordinary call (domain `probe`, rules in force before) every 10 ms.
 */
/** The longest gap between ticks of a 5 ms timer: how long the event loop was blocked at worst. */
function loopStallMeter(): { stop(): number } {
  let last = performance.now();
  let worst = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    worst = Math.max(worst, now - last - 5);
    last = now;
  }, 5);
  return {
    stop() {
      clearInterval(timer);
      return Math.max(worst, performance.now() - last - 5);
    },
  };
}

/** Computes for `ms` in slices of SLICE_MS, yielding to the event loop between them. */
async function slicedWork(ms: number): Promise<void> {
  const end = performance.now() + ms;
  let sink = 0;
  while (performance.now() < end) {
    const sliceEnd = performance.now() + SLICE_MS;
    while (performance.now() < sliceEnd) sink += Math.sqrt(sink + 1);
    await new Promise((resolve) => setImmediate(resolve));
  }
  if (!Number.isFinite(sink)) throw new Error('unreachable');
}

async function measureWhileCompiling(t: TestApp, push: () => Promise<void>): Promise<Stall> {
  const loadsBefore = await loads(t);
  let probing = true;
  let probes = 0;
  let worstProbeMs = 0;
  const prober = (async () => {
    while (probing) {
      const start = performance.now();
      await t.client.shouldRateLimit(oneDescriptor('probe', { k: 'v' }));
      worstProbeMs = Math.max(worstProbeMs, performance.now() - start);
      probes++;
      await sleep(10);
    }
  })();
  const control = loopStallMeter();
  await sleep(1000);
  const controlStallMs = control.stop();
  const start = performance.now();
  const meter = loopStallMeter();
  let stallMs: number;
  let tookMs: number;
  let probesWhileCompiling: number;
  let worstProbeWhileCompiling: number;
  let controlAfterMs: number;
  try {
    await push();
    await waitUntil('the snapshot to load', async () => (await loads(t)) > loadsBefore, { timeoutMs: 120_000, intervalMs: 20 });
  } finally {
    stallMs = meter.stop();
    tookMs = performance.now() - start;
    probesWhileCompiling = probes;
    worstProbeWhileCompiling = worstProbeMs;
    // The control again, as long as the compiling took (the longer a window, the likelier a
    // busy machine's own stall falls in it), with the probes still running, and this process
    // as busy as the compiling keeps it: work in slices of SLICE_MS, yielding between them. A
    // busy machine preempts a process that computes for longer than one that sleeps.
    worstProbeMs = 0;
    const after = loopStallMeter();
    await slicedWork(Math.min(Math.max(1000, tookMs), 30_000));
    controlAfterMs = after.stop();
    probing = false;
    await prober;
  }
  return {
    controlStallMs: Math.max(controlStallMs, controlAfterMs),
    controlProbeMs: worstProbeMs,
    tookMs,
    stallMs,
    probes: probesWhileCompiling,
    worstProbeMs: worstProbeWhileCompiling,
  };
}

describe('an xDS snapshot compiles in slices; the old rules serve meanwhile (issue 18, finding 4)', () => {
  let dir: string;
  let server: XdsServer;
  let t: TestApp;

  beforeAll(async () => {
    xdsServerBinary();
    dir = mkdtempSync(join(tmpdir(), 'floodgate-xds-bounded-'));
    trackDir(dir);
    server = await startXdsServer({ statePath: join(dir, 'state.json') });
    await server.push('v0', [
      { name: 'probe', domain: 'probe', descriptors: [{ key: 'k', rate_limit: { unit: 'SECOND', requests_per_unit: 1_000_000 } }] },
    ]);
    t = await startTestApp({}, { CONFIG_TYPE: 'GRPC_XDS_SOTW', CONFIG_GRPC_XDS_SERVER_URL: server.address, ...FAST_RETRY });
    await waitUntil('the first snapshot', async () => (await rlconfig(t)).includes('probe.k'), { timeoutMs: 10_000 });
  }, 660_000);
  afterAll(async () => {
    await t?.stop();
    await server?.kill();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const probe = { name: 'probe', domain: 'probe', descriptors: [{ key: 'k', rate_limit: { unit: 'SECOND', requests_per_unit: 1_000_000 } }] };

  for (const count of [1000, 9000]) {
    // The targets of issue 18 (stall < 100 ms), beyond what the shared machine alone costs (the
    // control, twice, as test/abuse/abuse-harness.ts counts it). Before, 1,000 resources blocked
    // the loop for 4.7 s and 9,000 for 43 s; then, compiled in slices, 9,000 still stalled it for
    // 133-374 ms when swapped in (prom-client's floodgate_rules_loaded set for each domain).
    test(`${count} resources: no stall of 100 ms beyond the machine's own, probe calls answered meanwhile`, async () => {
      const resources = [probe, ...Array.from({ length: count - 1 }, (_, i) => small(i, count))];
      const last = `domain-${count - 2}.remote_address: unit=SECOND requests_per_unit=${count}`;
      const figures = await measureWhileCompiling(t, () => server.push(`v${count}`, resources));
      console.log(
        `xDS snapshot of ${count} resources: in force after ${figures.tookMs.toFixed(0)} ms, worst event-loop stall ${figures.stallMs.toFixed(1)} ms ` +
          `(control ${figures.controlStallMs.toFixed(1)} ms), ${figures.probes} probe calls, worst ${figures.worstProbeMs.toFixed(1)} ms (control ${figures.controlProbeMs.toFixed(1)} ms)`,
      );
      const allowed = 100 + 2 * figures.controlStallMs;
      expect(figures.stallMs).toBeLessThan(allowed);
      // A probe call: against the probe calls of the control (the same work in slices).
      expect(figures.worstProbeMs).toBeLessThan(100 + 2 * Math.max(figures.controlStallMs, figures.controlProbeMs));
      expect(figures.probes).toBeGreaterThan(0);
      const inForce = await rlconfig(t);
      expect(inForce).toContain(last);
      expect(inForce).toContain(`domain-0.path_/api/*: unit=MINUTE requests_per_unit=100`);
    }, 180_000);
  }

  test('a snapshot over XDS_MAX_RESOURCES is NACKed naming the bound; the rules in force stay', async () => {
    const before = await rlconfig(t);
    const resources = [probe, ...Array.from({ length: 10_000 }, (_, i) => small(i, 3))];
    await server.push('v-too-many', resources);
    const nack = await waitUntil('the NACK', async () => (await server.requests()).find((r) => r.error_detail?.includes('XDS_MAX_RESOURCES')), {
      timeoutMs: 30_000,
    });
    expect(nack.error_detail).toBe('snapshot has 10001 resources, more than the limit of 10000 (XDS_MAX_RESOURCES)');
    expect(await rlconfig(t)).toBe(before);
  }, 120_000);
});

describe('NACKs are paced whatever the snapshots say (issue 18, finding 9)', () => {
  let dir: string;
  let server: XdsServer;
  let t: TestApp;
  const errorLogs: string[] = [];

  beforeAll(async () => {
    xdsServerBinary();
    dir = mkdtempSync(join(tmpdir(), 'floodgate-xds-nacks-'));
    trackDir(dir);
    server = await startXdsServer({ statePath: join(dir, 'state.json') });
    await server.push('good', [small(1, 5)]);
    t = await startTestApp(
      {},
      { CONFIG_TYPE: 'GRPC_XDS_SOTW', CONFIG_GRPC_XDS_SERVER_URL: server.address, ...FAST_RETRY },
      { logger: { debug: () => {}, info: () => {}, warn: () => {}, error: (m) => errorLogs.push(m) } },
    );
    await waitUntil('the first snapshot', async () => (await rlconfig(t)).includes('domain-1.remote_address'), { timeoutMs: 10_000 });
  }, 660_000);
  afterAll(async () => {
    await t?.stop();
    await server?.kill();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test('two bad snapshots alternating for 10 s: a few NACKs and ERROR lines a second, not thousands', async () => {
    const badA = [{ name: 'bad-a', domain: 'a', descriptors: [{ key: 'k', rate_limit: { requests_per_unit: 1 } }] }];
    const badB = [{ name: 'bad-b', domain: '', descriptors: [] }];
    const before = await rlconfig(t);
    const nacksBefore = (await server.requests()).filter((r) => r.error_detail).length;
    const logsBefore = errorLogs.length;
    // At least 10 s and at least 200 pushes, however slow this machine is (bounded): the bounds
    // below are rates over the time it took, not counts in a fixed time.
    const started = Date.now();
    let pushes = 0;
    for (let i = 0; (Date.now() - started < 10_000 || pushes < 200) && Date.now() - started < 120_000; i++) {
      await server.push(i % 2 === 0 ? 'bad-a' : 'bad-b', i % 2 === 0 ? badA : badB);
      pushes++;
    }
    const seconds = (Date.now() - started) / 1000;
    const nacks = (await server.requests()).filter((r) => r.error_detail).length - nacksBefore;
    const logs = errorLogs.length - logsBefore;
    console.log(`alternating bad xDS snapshots for ${seconds.toFixed(1)} s: ${pushes} pushes, ${nacks} NACKs, ${logs} ERROR log lines`);
    expect(pushes).toBeGreaterThanOrEqual(200);
    // 4 a second (one per 250 ms, NACK_INTERVAL_MS), with slack for the first and the timers;
    // one ERROR line a second (LOG_INTERVAL_MS).
    expect(nacks).toBeGreaterThan(0);
    expect(nacks).toBeLessThanOrEqual(Math.ceil(4 * seconds) + 5);
    expect(logs).toBeLessThanOrEqual(Math.ceil(seconds) + 2);
    expect(
      errorLogs.some((l) => l.includes("bad-a: invalid rate limit unit 'UNKNOWN'") || l.includes('bad-b: config file cannot have empty domain')),
    ).toBe(true);
    expect(await rlconfig(t)).toBe(before);
    // A good snapshot after them is taken at once.
    await server.push('good-2', [small(1, 9)]);
    await waitUntil('the good snapshot', async () => (await rlconfig(t)).includes('requests_per_unit=9'), { timeoutMs: 15_000 });
  }, 60_000);
});
