// floodgate_event_loop_delay_seconds and floodgate_gc_pause_seconds{kind} (issue 29): the
// loop-delay sampler on a clock driven by hand, then both metrics moving in this
// process after a fixed amount of work (a loop blocked for 60 ms, a forced full GC, a fixed
// amount of garbage). Nothing asserts a duration beyond what the work itself guarantees: a
// slower machine only makes the loop later.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { PlainHistogram } from '../../../src/metrics/plain-histogram';
import { LoopDelaySampler, RuntimeMetrics } from '../../../src/metrics/runtime-metrics';
import { parseScrape, total } from '../../helpers/metrics-scrape';

// gc() in this process, for a forced full collection.
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

async function read(registry: Registry): Promise<ReturnType<typeof parseScrape>> {
  return parseScrape(await registry.metrics());
}

describe('LoopDelaySampler', () => {
  it('observes how late each run is beyond its period, in seconds, never below 0', async () => {
    const registry = new Registry();
    const h = new PlainHistogram({
      name: 'loop_seconds',
      help: 'h',
      labelNames: [],
      buckets: [0.001, 0.005, 0.02, 0.05],
      registers: [registry],
    });
    let clock = 1000;
    const sampler = new LoopDelaySampler(h.child(), 10, () => clock);
    sampler.close(); // driven by hand below, not by its timer
    for (const at of [1010, 1020.5, 1029, 1039.5, 1079.5, 1089.5, 1129.5]) {
      clock = at;
      sampler.sample();
    }
    // Late by 0, 0.5, 0 (early), 0.5, 30, 0 and 30 ms.
    const s = await read(registry);
    expect(total(s, 'loop_seconds_count')).toBe(7);
    expect(total(s, 'loop_seconds_bucket', { le: '0.001' })).toBe(5);
    expect(total(s, 'loop_seconds_bucket', { le: '0.02' })).toBe(5);
    expect(total(s, 'loop_seconds_bucket', { le: '0.05' })).toBe(7);
    expect(total(s, 'loop_seconds_sum')).toBeCloseTo(0.061, 9);
  });
});

describe('RuntimeMetrics', () => {
  let runtime: RuntimeMetrics | undefined;
  afterEach(() => runtime?.close());

  it('counts a loop blocked for 60 ms as a delay over 20 ms', async () => {
    const registry = new Registry();
    runtime = new RuntimeMetrics(registry);
    const over20 = (s: ReturnType<typeof parseScrape>): number =>
      total(s, 'floodgate_event_loop_delay_seconds_bucket', { le: '+Inf' }) -
      total(s, 'floodgate_event_loop_delay_seconds_bucket', { le: '0.02' });
    expect(over20(await read(registry))).toBe(0);
    await new Promise((r) => setTimeout(r, 30));
    const start = Date.now();
    while (Date.now() - start < 60); // the loop blocked: the monitor's timer runs 50 ms late at least
    let s = await read(registry);
    for (let i = 0; i < 100 && over20(s) === 0; i++) {
      await new Promise((r) => setTimeout(r, 20));
      s = await read(registry);
    }
    expect(over20(s)).toBeGreaterThanOrEqual(1);
    expect(total(s, 'floodgate_event_loop_delay_seconds_sum')).toBeGreaterThanOrEqual(0.04);
  });

  it('counts a forced full collection as major, and scavenges of the young generation as minor', async () => {
    const registry = new Registry();
    runtime = new RuntimeMetrics(registry);
    gc();
    // 400 MB of short-lived objects: more than any young generation, so at least one scavenge.
    let keep = 0;
    for (let i = 0; i < 400_000; i++) keep += new Array<number>(128).fill(i).length;
    expect(keep).toBe(400_000 * 128);
    let s = await read(registry);
    const seen = (kind: string): number => total(s, 'floodgate_gc_pause_seconds_count', { kind });
    // The observer's entries arrive on a later turn of the loop.
    for (let i = 0; i < 100 && (seen('major') === 0 || seen('minor') === 0); i++) {
      await new Promise((r) => setTimeout(r, 20));
      s = await read(registry);
    }
    expect(seen('major')).toBeGreaterThanOrEqual(1);
    expect(seen('minor')).toBeGreaterThanOrEqual(1);
    expect(total(s, 'floodgate_gc_pause_seconds_sum', { kind: 'major' })).toBeGreaterThan(0);
  });

  it('stops observing when closed', async () => {
    const registry = new Registry();
    runtime = new RuntimeMetrics(registry);
    runtime.close();
    gc();
    await new Promise((r) => setTimeout(r, 50));
    expect(total(await read(registry), 'floodgate_gc_pause_seconds_count')).toBe(0);
  });
});
