import { readFileSync } from 'node:fs';
import type { Registry } from 'prom-client';
import type { Logger } from '../base/log';
import { PrometheusMetrics } from '../metrics/metrics';
import { StatsdMetrics } from '../metrics/statsd-metrics';
import { createStatsdTransport } from '../metrics/statsd-transport';
import { TeeMetrics } from '../metrics/tee-metrics';
import { OperatorMetrics } from '../metrics/operator-metrics';
import { RuntimeMetrics } from '../metrics/runtime-metrics';
import { MappedPrometheusSink } from '../metrics/mapped-prometheus-sink';
import { StatsdMapping } from '../metrics/statsd-mapping';
import type { Settings } from '../settings/settings';
import type { RateLimitHandler } from '../service/rate-limit-handler';
import { SettingsError } from '../base/errors';

import { closeRunning, type Core, type Running } from './running';

// The metric sinks of a running app: Prometheus, statsd or DogStatsD, and the mapped registry.

/** USE_STATSD / USE_DOG_STATSD: counted in memory, sent every STATS_FLUSH_INTERVAL. */
function startStatsd(settings: Settings, logger: Logger, running: Running): StatsdMetrics | undefined {
  const s = settings.statsd;
  if (s === undefined) return undefined;
  const transport = createStatsdTransport({
    host: s.host,
    port: s.port,
    protocol: s.protocol,
    onError: (message) => logger.warn(`stats not delivered: ${message}`),
  });
  const statsd = new StatsdMetrics(s, transport);
  running.stats.push(statsd);
  logger.info(`stats: ${s.format} to ${s.host}:${s.port} (${s.protocol}) every ${s.flushIntervalMs} ms`);
  return statsd;
}

/** PROMETHEUS_MAPPER_YAML: the reference's stats, flushed through that statsd_exporter mapping into a registry. */
function startMappedPrometheus(settings: Settings, running: Running): { metrics: StatsdMetrics; registry: Registry } | undefined {
  const m = settings.prometheusMapper;
  if (m === undefined) return undefined;
  let text: string;
  try {
    text = readFileSync(m.path, 'utf8');
  } catch (err) {
    throw new SettingsError(`invalid value for PROMETHEUS_MAPPER_YAML: '${m.path}' (${(err as Error).message})`);
  }
  const sink = new MappedPrometheusSink(new StatsdMapping(text), { maxSeries: settings.metricsMaxSeries });
  const metrics = new StatsdMetrics({ format: 'statsd', flushIntervalMs: m.flushIntervalMs, extraTags: m.extraTags, mogrifiers: [] }, sink);
  running.stats.push(metrics);
  return { metrics, registry: sink.registry };
}

/** The metric sinks: Prometheus always, statsd and the mapped registry when configured. */
export async function startMetrics(
  settings: Settings,
  logger: Logger,
  running: Running,
): Promise<{ core: Core; statsd: StatsdMetrics | undefined }> {
  const prometheus = new PrometheusMetrics({
    collectDefault: true,
    maxSeries: settings.metricsMaxSeries,
    responseTimeInMilliseconds: settings.prometheusResponseTimeAsMilliseconds,
  });
  const statsd = startStatsd(settings, logger, running);
  let mapped;
  try {
    mapped = startMappedPrometheus(settings, running);
  } catch (err) {
    await closeRunning(running, 0);
    throw err;
  }
  const sinks = [prometheus, ...(statsd ? [statsd] : []), ...(mapped ? [mapped.metrics] : [])];
  const prometheusRegistry = mapped?.registry ?? prometheus.registry;
  running.runtimeMetrics = new RuntimeMetrics(prometheusRegistry);
  return {
    core: {
      logger,
      prometheus,
      prometheusRegistry,
      metrics: sinks.length > 1 ? new TeeMetrics(sinks) : prometheus,
      // Served on /metrics with or without a mapping: the mapped registry holds the reference's
      // stats, these are floodgate's own. (A mapping that names a series like one of them loses
      // that series: the sink drops a name the registry already has, and counts it a conflict.)
      operator: new OperatorMetrics(prometheusRegistry, { maxDomainSeries: settings.metricsMaxSeries }),
    },
    statsd,
  };
}

/**
 * Counts the calls that end near or past the caller's deadline (floodgate_calls_near_deadline_total).
 * The answer itself is returned untouched (no async frame around every call); the count rides on it.
 */
export function watchDeadlines(service: RateLimitHandler, operator: OperatorMetrics): RateLimitHandler {
  return {
    shouldRateLimit(request, deadline, incoming) {
      const started = Date.now();
      const answer = service.shouldRateLimit(request, deadline, incoming);
      const ended = (): void => operator.callEnded(started, deadline, Date.now());
      answer.then(ended, ended);
      return answer;
    },
  };
}
