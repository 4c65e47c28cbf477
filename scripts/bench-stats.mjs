// The pure parts of scripts/bench.mjs (issue 29), kept apart so that test/unit/bench-stats.test.ts
// pins them without starting anything: the rates of --rate, the latency figures of one ghz round
// from its per-call details, and the runtime figures of a /metrics scrape before and after a round.

/**
 * Errors of calls ghz itself cut when its -z time is up (it closes its connections under the
 * calls in flight): not the server's doing, and their latency is the time until the cut.
 */
export const GHZ_CUT = /transport is closing|client connection is closing|context canceled|use of closed network connection/;

/** Envoy's usual timeout for the rate-limit call (envoy/README.md): a call slower than this is an admit. */
export const ENVOY_TIMEOUT_MS = 20;

/**
 * `--rate 50%,80%` (shares of the reference's saturated rate, or floodgate's own without
 * --reference) or `--rate 4000,6000` (req/s), mixed as wanted.
 * @returns {{ label: string, share?: number, rps?: number }[]}
 */
export function parseRates(spec) {
  const parts = String(spec ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (parts.length === 0) throw new Error(`--rate needs shares (50%,80%) or req/s (4000), got '${spec}'`);
  return parts.map((p) => {
    const share = /^(\d+(?:\.\d+)?)%$/.exec(p);
    if (share) {
      const v = Number(share[1]);
      if (!(v > 0 && v <= 200)) throw new Error(`--rate: a share must be within (0 %, 200 %], got ${p}`);
      return { label: p, share: v / 100 };
    }
    if (/^\d+(?:\.\d+)?$/.test(p) && Number(p) >= 1) return { label: `${Number(p)}/s`, rps: Number(p) };
    throw new Error(`--rate: '${p}' is neither a share (50%) nor a rate in req/s (4000)`);
  });
}

/** The value at quantile `q` (0..1) of sorted `xs`: nearest rank, as ghz's latencyDistribution. */
export function quantile(sorted, q) {
  if (sorted.length === 0) return undefined;
  const rank = Math.ceil(q * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1];
}

/**
 * Latency figures of one ghz `-O json` report from its per-call `details` (latency in ns, a
 * timestamp per call), in ms. Calls that started within `skipMs` of the first one are left out:
 * ghz opens its connections then, and the calls queued behind the handshakes measure ghz, not
 * the server (both servers alike). Calls ended by ghz's own deadline (-z) are not counted.
 * Without details, from ghz's coarse histogram (share over the threshold) and
 * latencyDistribution (p50, p99; no p99.9).
 */
export function latencyFigures(report, { skipMs = 500, overMs = ENVOY_TIMEOUT_MS } = {}) {
  const details = report.details ?? [];
  if (details.length > 0) {
    const t0 = Math.min(...details.slice(0, 1000).map((d) => Date.parse(d.timestamp)));
    const kept = [];
    let skipped = 0;
    for (const d of details) {
      if (GHZ_CUT.test(d.error ?? '')) continue;
      if (Date.parse(d.timestamp) - t0 < skipMs) {
        skipped++;
        continue;
      }
      kept.push(d.latency / 1e6);
    }
    kept.sort((a, b) => a - b);
    const over = kept.length - upperBound(kept, overMs);
    return {
      calls: kept.length,
      skipped,
      p50: quantile(kept, 0.5),
      p99: quantile(kept, 0.99),
      p999: quantile(kept, 0.999),
      max: kept[kept.length - 1],
      overShare: kept.length ? over / kept.length : undefined,
    };
  }
  const pct = (p) => {
    const d = (report.latencyDistribution ?? []).find((x) => x.percentage === p);
    return d ? d.latency / 1e6 : undefined;
  };
  const hist = report.histogram ?? [];
  const total = hist.reduce((s, b) => s + b.count, 0);
  // A bucket's mark is its upper edge in seconds: the calls of buckets above the threshold.
  const over = hist.filter((b) => b.mark * 1000 > overMs).reduce((s, b) => s + b.count, 0);
  return {
    calls: report.count,
    skipped: 0,
    p50: pct(50),
    p99: pct(99),
    p999: undefined,
    max: report.slowest / 1e6,
    overShare: total ? over / total : undefined,
  };
}

/** How many of sorted `xs` are <= x. */
function upperBound(xs, x) {
  let lo = 0;
  let hi = xs.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (xs[mid] <= x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Samples of a Prometheus text scrape: { name, labels, value }. */
export function parseScrape(text) {
  const out = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) continue;
    const labels = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2];
    out.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return out;
}

const sum = (samples, name, labels = {}) =>
  samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v)).reduce((n, s) => n + s.value, 0);

/**
 * What floodgate's own metrics say about one round: the scrape after minus the scrape before.
 * Event-loop delay samples (one per 10 ms of loop time) and those over 20 ms and 5 ms, with
 * the total delay; GC pauses per kind (count, total ms, and those over 5 ms); and the handler's
 * own share of calls over 20 ms (ratelimit_service_response_time_seconds, from decode to
 * answer): what the client saw over 20 ms beyond that share waited outside the handler.
 */
export function runtimeDelta(before, after) {
  const d = (name, labels) => sum(after, name, labels) - sum(before, name, labels);
  const eldTotal = d('floodgate_event_loop_delay_seconds_count');
  const eldUpTo = (le) => d('floodgate_event_loop_delay_seconds_bucket', { le });
  const gc = {};
  for (const kind of ['minor', 'major', 'incremental', 'weakcb']) {
    const count = d('floodgate_gc_pause_seconds_count', { kind });
    gc[kind] = {
      count,
      totalMs: d('floodgate_gc_pause_seconds_sum', { kind }) * 1000,
      over5ms: count - d('floodgate_gc_pause_seconds_bucket', { kind, le: '0.005' }),
    };
  }
  const handled = d('ratelimit_service_response_time_seconds_count');
  return {
    loopSamples: eldTotal,
    loopOver20ms: eldTotal - eldUpTo('0.02'),
    loopOver5ms: eldTotal - eldUpTo('0.005'),
    loopDelayMs: d('floodgate_event_loop_delay_seconds_sum') * 1000,
    gc,
    handled,
    // The young generation's size after the round (prom-client's default metrics): with the
    // scavenges' count, how much a call allocates that dies young.
    newSpaceMb: sum(after, 'nodejs_heap_space_size_total_bytes', { space: 'new' }) / 2 ** 20,
    handlerOverShare: handled ? (handled - d('ratelimit_service_response_time_seconds_bucket', { le: '0.02' })) / handled : undefined,
  };
}
