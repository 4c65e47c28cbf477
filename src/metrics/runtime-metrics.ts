import { PerformanceObserver, constants, monitorEventLoopDelay, type IntervalHistogram, type PerformanceEntry } from 'node:perf_hooks';
import type { Registry } from 'prom-client';
import { PlainHistogram, type HistogramChild } from './plain-histogram';

/*
 * Why: a call that waits longer than Envoy's timeout (20 ms in envoy/README.md) is admitted
 * unchecked, and issue 29 found floodgate's tail there while its CPU per call was level with the
 * reference. These two histograms say how much of that tail is the process itself: the event
 * loop late to run anything (a long task, a GC pause, the kernel not scheduling us), and the GC
 * pauses by kind. Both are fed outside the call path: the loop's delay is sampled by libuv's own
 * timer (perf_hooks.monitorEventLoopDelay, C++, no JS per sample) and read on scrape; a GC pause
 * is one PerformanceObserver callback per collection, not per call.
 */

/** How often the event loop's delay is sampled, in ms: prom-client's default metrics sample at the same rate. */
export const EVENT_LOOP_SAMPLE_MS = 10;

/** Seconds. Fine at the bottom: the 20 ms that matters sits in the middle. */
const EVENT_LOOP_BUCKETS = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1];
const GC_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1];

/** perf_hooks' GC kinds, by the names prom-client's nodejs_gc_duration_seconds uses. */
const GC_KINDS: ReadonlyMap<number, string> = new Map([
  [constants.NODE_PERFORMANCE_GC_MINOR, 'minor'],
  [constants.NODE_PERFORMANCE_GC_MAJOR, 'major'],
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL, 'incremental'],
  [constants.NODE_PERFORMANCE_GC_WEAKCB, 'weakcb'],
]);

/**
 * Moves what `eld` recorded since its last reset into `child`, then resets it. The monitor keeps
 * only an HDR histogram read through percentiles: each percentile step (p_prev, p] holds
 * round(count·p) − round(count·p_prev) samples, none above that step's value, and is observed at
 * that value (an upper estimate, as HDR's values are). A sample is the time between two timer
 * runs, so the resolution itself is taken off: what is left is how late the loop was.
 */
export function drainEventLoopDelay(eld: IntervalHistogram, child: HistogramChild, resolutionMs: number): void {
  const count = eld.count;
  if (count > 0) {
    let before = 0;
    for (const [percentile, nanos] of eld.percentiles) {
      const upTo = Math.round((count * percentile) / 100);
      if (upTo > before) child.add(Math.max(0, nanos / 1e6 - resolutionMs) / 1000, upTo - before);
      before = Math.max(before, upTo);
    }
  }
  eld.reset();
}

/**
 * floodgate_event_loop_delay_seconds and floodgate_gc_pause_seconds{kind}, on `registry`.
 * close() stops both sources.
 */
export class RuntimeMetrics {
  private readonly eld: IntervalHistogram;
  private readonly observer: PerformanceObserver;

  constructor(registry: Registry) {
    const registers = [registry];
    this.eld = monitorEventLoopDelay({ resolution: EVENT_LOOP_SAMPLE_MS });
    this.eld.enable();
    const eld = this.eld;
    const loopDelay = new PlainHistogram({
      name: 'floodgate_event_loop_delay_seconds',
      help: `How late the event loop ran a timer due every ${EVENT_LOOP_SAMPLE_MS} ms (monitorEventLoopDelay, its resolution taken off): one sample per ${EVENT_LOOP_SAMPLE_MS} ms of loop time, read on scrape`,
      labelNames: [],
      buckets: EVENT_LOOP_BUCKETS,
      registers,
      collect: (h) => drainEventLoopDelay(eld, h.child(), EVENT_LOOP_SAMPLE_MS),
    });
    loopDelay.child();
    const gcPause = new PlainHistogram({
      name: 'floodgate_gc_pause_seconds',
      help: 'Garbage collection pauses, by kind (minor: scavenge of the young generation; major: mark-compact; incremental: a step of incremental marking; weakcb: weak callbacks)',
      labelNames: ['kind'],
      buckets: GC_BUCKETS,
      registers,
    });
    const byKind = new Map<number, HistogramChild>();
    for (const [kind, name] of GC_KINDS) byKind.set(kind, gcPause.child(name));
    this.observer = new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) observeGc(entry, byKind);
    });
    this.observer.observe({ entryTypes: ['gc'] });
  }

  close(): void {
    this.observer.disconnect();
    this.eld.disable();
  }
}

function observeGc(entry: PerformanceEntry, byKind: ReadonlyMap<number, HistogramChild>): void {
  const kind = (entry as PerformanceEntry & { readonly detail?: { readonly kind?: number } }).detail?.kind;
  if (kind !== undefined) byKind.get(kind)?.observe(entry.duration / 1000);
}
