import { PerformanceObserver, constants, performance, type PerformanceEntry } from 'node:perf_hooks';
import type { Registry } from 'prom-client';
import { PlainHistogram, type HistogramChild } from './plain-histogram';

/*
 * Why: a call that waits longer than Envoy's timeout (20 ms in envoy/README.md) is admitted
 * unchecked, and issue 29 found floodgate's tail there while its CPU per call was level with the
 * reference. These two histograms say how much of that tail is the process itself: the event
 * loop late to run anything (a long task, a GC pause, the kernel not scheduling us), and the GC
 * pauses by kind. Both are fed outside the call path: one timer every 10 ms, and one
 * PerformanceObserver callback per collection, not per call.
 *
 * Why a timer of our own and not perf_hooks.monitorEventLoopDelay (which prom-client's
 * nodejs_eventloop_lag_* read): the monitor keeps only an HDR histogram read through
 * percentiles, so turning it into Prometheus buckets means resetting it at each scrape, and its
 * reset forgets when its timer last ran: the interval in progress is lost, and with it a stall
 * that a scrape happens to follow before the timer runs again (the unit test blocks the loop
 * and then reads, exactly that). Observing each sample into plain buckets loses nothing.
 */

/** How often the event loop's delay is sampled, in ms: prom-client's default metrics sample at the same rate. */
export const EVENT_LOOP_SAMPLE_MS = 10;

/**
 * Samples how late a timer due every `periodMs` runs: each run observes, in seconds, the time
 * since the previous run beyond `periodMs` (Node re-arms an interval from when it last ran).
 */
export class LoopDelaySampler {
  private last: number;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly child: HistogramChild,
    private readonly periodMs: number,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.last = this.now();
    this.timer = setInterval(() => this.sample(), periodMs);
    // Never the reason the process stays up.
    this.timer.unref();
  }

  /** One sample: how late this run is. Public for the unit test, which drives it with its own clock. */
  sample(): void {
    const now = this.now();
    this.child.observe(Math.max(0, now - this.last - this.periodMs) / 1000);
    this.last = now;
  }

  close(): void {
    clearInterval(this.timer);
  }
}

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
 * floodgate_event_loop_delay_seconds and floodgate_gc_pause_seconds{kind}, on `registry`.
 * close() stops both sources.
 */
export class RuntimeMetrics {
  private readonly loop: LoopDelaySampler;
  private readonly observer: PerformanceObserver;

  constructor(registry: Registry) {
    const registers = [registry];
    const loopDelay = new PlainHistogram({
      name: 'floodgate_event_loop_delay_seconds',
      help: `How late the event loop ran a timer due every ${EVENT_LOOP_SAMPLE_MS} ms: one sample per ${EVENT_LOOP_SAMPLE_MS} ms of loop time`,
      labelNames: [],
      buckets: EVENT_LOOP_BUCKETS,
      registers,
    });
    this.loop = new LoopDelaySampler(loopDelay.child(), EVENT_LOOP_SAMPLE_MS);
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
    this.loop.close();
  }
}

function observeGc(entry: PerformanceEntry, byKind: ReadonlyMap<number, HistogramChild>): void {
  const kind = (entry as PerformanceEntry & { readonly detail?: { readonly kind?: number } }).detail?.kind;
  if (kind !== undefined) byKind.get(kind)?.observe(entry.duration / 1000);
}
