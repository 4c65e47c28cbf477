// The pure parts of the benchmark (scripts/bench-stats.mjs, issue 29): --rate parsing, the
// latency figures of a ghz report from its per-call details, and the runtime figures of two
// /metrics scrapes. Fixed inputs, no timing.
import { beforeAll, describe, expect, it } from 'vitest';
import type * as BenchStats from '../../scripts/bench-stats.mjs' with { 'resolution-mode': 'import' };

// An ES module (the bench script's), loaded as one from this CommonJS-compiled test.
let stats: typeof BenchStats;
beforeAll(async () => {
  stats = await import('../../scripts/bench-stats.mjs');
});
const parseRates: typeof BenchStats.parseRates = (spec) => stats.parseRates(spec);
const quantile: typeof BenchStats.quantile = (xs, q) => stats.quantile(xs, q);
const latencyFigures: typeof BenchStats.latencyFigures = (report, options) => stats.latencyFigures(report, options);
const parseScrape: typeof BenchStats.parseScrape = (text) => stats.parseScrape(text);
const runtimeDelta: typeof BenchStats.runtimeDelta = (before, after) => stats.runtimeDelta(before, after);

const T0 = Date.parse('2026-11-28T20:00:00Z');
/** A ghz detail: started `atMs` after T0, `ms` long. */
const call = (atMs: number, ms: number, error = '') => ({
  timestamp: new Date(T0 + atMs).toISOString(),
  latency: ms * 1e6,
  error,
  status: error ? 'Unavailable' : 'OK',
});

describe('parseRates', () => {
  it('reads shares and req/s, mixed', () => {
    expect(parseRates('50%,80%')).toEqual([
      { label: '50%', share: 0.5 },
      { label: '80%', share: 0.8 },
    ]);
    expect(parseRates(' 4000, 12.5% ')).toEqual([
      { label: '4000/s', rps: 4000 },
      { label: '12.5%', share: 0.125 },
    ]);
  });

  it('refuses what is neither', () => {
    for (const bad of [undefined, '', '0%', '250%', 'fast', '-3', '0.5', '50%%']) {
      expect(() => parseRates(bad), String(bad)).toThrow(/--rate/);
    }
  });
});

describe('quantile', () => {
  it('takes the nearest rank', () => {
    const xs = Array.from({ length: 1000 }, (_, i) => i + 1);
    expect(quantile(xs, 0.5)).toBe(500);
    expect(quantile(xs, 0.99)).toBe(990);
    expect(quantile(xs, 0.999)).toBe(999);
    expect(quantile(xs, 1)).toBe(1000);
    expect(quantile([7], 0.999)).toBe(7);
    expect(quantile([], 0.5)).toBeUndefined();
  });
});

describe('latencyFigures', () => {
  it('from the details: the first 500 ms and the calls ghz cut left out, percentiles and the share over 20 ms', () => {
    const details = [
      call(0, 80), // connecting: left out
      call(499, 60), // still within the first 500 ms
      ...Array.from({ length: 1990 }, (_, i) => call(500 + i, 1 + (i % 10) / 10)),
      ...Array.from({ length: 8 }, (_, i) => call(3000 + i, 25 + i)), // over 20 ms
      call(3100, 20), // exactly 20 ms is not over
      call(3200, 5000, 'rpc error: code = Canceled desc = context canceled'), // ghz's -z cut
      call(
        3250,
        3,
        'rpc error: code = Unavailable desc = error reading from server: read tcp 127.0.0.1:52966->127.0.0.1:50998: use of closed network connection',
      ),
      call(3300, 100),
    ];
    const f = latencyFigures({ details, count: details.length });
    expect(f.skipped).toBe(2);
    expect(f.calls).toBe(2000);
    expect(f.overShare).toBeCloseTo(9 / 2000, 12);
    expect(f.p50).toBeCloseTo(1.5, 9);
    expect(f.p99).toBeCloseTo(1.9, 9);
    expect(f.p999).toBe(31);
    expect(f.max).toBe(100);
  });

  it('without details, from the histogram and latencyDistribution', () => {
    const f = latencyFigures({
      count: 100,
      slowest: 40e6,
      histogram: [
        { mark: 0.005, count: 90 },
        { mark: 0.019, count: 6 },
        { mark: 0.04, count: 4 },
      ],
      latencyDistribution: [
        { percentage: 50, latency: 2e6 },
        { percentage: 99, latency: 35e6 },
      ],
    });
    expect(f).toMatchObject({ p50: 2, p99: 35, p999: undefined, max: 40, overShare: 0.04 });
  });
});

describe('runtimeDelta', () => {
  const scrape = (eld: number[], minor: [number, number, number], handled: [number, number]) =>
    parseScrape(
      [
        '# HELP floodgate_event_loop_delay_seconds x',
        `floodgate_event_loop_delay_seconds_bucket{le="0.005"} ${eld[0]}`,
        `floodgate_event_loop_delay_seconds_bucket{le="0.02"} ${eld[1]}`,
        `floodgate_event_loop_delay_seconds_bucket{le="+Inf"} ${eld[2]}`,
        `floodgate_event_loop_delay_seconds_sum ${eld[3]}`,
        `floodgate_event_loop_delay_seconds_count ${eld[2]}`,
        `floodgate_gc_pause_seconds_bucket{le="0.005",kind="minor"} ${minor[0]}`,
        `floodgate_gc_pause_seconds_sum{kind="minor"} ${minor[1]}`,
        `floodgate_gc_pause_seconds_count{kind="minor"} ${minor[2]}`,
        `ratelimit_service_response_time_seconds_bucket{le="0.02",grpc_method="ShouldRateLimit"} ${handled[0]}`,
        `ratelimit_service_response_time_seconds_count{grpc_method="ShouldRateLimit"} ${handled[1]}`,
        '',
      ].join('\n'),
    );

  it('is the scrape after minus the scrape before', () => {
    const d = runtimeDelta(
      scrape([10, 12, 12, 0.01], [3, 0.004, 3], [100, 100]),
      scrape([900, 990, 1000, 0.61], [50, 0.104, 53], [10_090, 10_100]),
    );
    expect(d.loopSamples).toBe(988);
    expect(d.loopOver20ms).toBe(10);
    expect(d.loopOver5ms).toBe(98);
    expect(d.loopDelayMs).toBeCloseTo(600, 9);
    expect(d.gc.minor).toEqual({ count: 50, totalMs: expect.closeTo(100, 9) as number, over5ms: 3 });
    expect(d.gc.major).toEqual({ count: 0, totalMs: 0, over5ms: 0 });
    expect(d.handled).toBe(10_000);
    expect(d.handlerOverShare).toBeCloseTo(10 / 10_000, 12);
  });
});
