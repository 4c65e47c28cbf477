import { SettingsError } from '../base/errors';
import type { Mogrifier } from '../metrics/dogstatsd-mogrifier';
import { sanitizeTagName, sanitizeTagValue } from '../metrics/stat-name';
import type { StatsdSettings } from '../metrics/statsd-metrics';
import type { TracingSettings } from '../tracing/tracing-settings';
import { bool, float, list, oneOf, port, positiveDuration, str, stringMap, type Env } from './parse';

// What floodgate reports and where: the stats sinks (the reference's names and defaults) and tracing.

export interface StatsSettings {
  readonly statsd?: StatsdSettings;
  readonly prometheusMapper?: { readonly path: string; readonly flushIntervalMs: number; readonly extraTags: StatsdSettings['extraTags'] };
  /** DISABLE_STATS turns the Prometheus endpoint off too. */
  readonly usePrometheus?: false;
  readonly prometheusResponseTimeAsMilliseconds: boolean;
}

/**
 * TRACING_SERVICE_* and the sampling rate. Read whatever TRACING_ENABLED says, as envconfig
 * reads every variable; the OTLP endpoint and the rest are the SDK's own OTEL_* variables.
 */
export function tracingSettings(env: Env): { tracing?: TracingSettings } {
  const tracing: TracingSettings = Object.freeze({
    serviceName: str(env, 'TRACING_SERVICE_NAME', 'RateLimit'),
    serviceNamespace: str(env, 'TRACING_SERVICE_NAMESPACE', ''),
    serviceInstanceId: str(env, 'TRACING_SERVICE_INSTANCE_ID', ''),
    // Any number, as in the reference: >= 1 samples every root trace, <= 0 none.
    samplingRate: float(env, 'TRACING_SAMPLING_RATE', 1, -Number.MAX_VALUE, Number.MAX_VALUE),
    exporterProtocol: oneOf<TracingSettings['exporterProtocol']>(env, 'TRACING_EXPORTER_PROTOCOL', 'http', ['http', 'grpc']),
  });
  return bool(env, 'TRACING_ENABLED', false) ? { tracing } : {};
}

/**
 * EXTRA_TAGS as gostats serializes them: empty names or values dropped, sorted by name, `.`, `:`
 * and `|` in values made `_` (and, ours, control characters anywhere: no tag starts a new line).
 */
function extraTags(env: Env): Array<[string, string]> {
  return stringMap(env, 'EXTRA_TAGS')
    .filter(([k, v]) => k !== '' && v !== '')
    .map(([k, v]): [string, string] => [sanitizeTagName(k), sanitizeTagValue(v)])
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

/** USE_DOG_STATSD_MOGRIFIERS=A,B with DOG_STATSD_MOGRIFIER_A_PATTERN, _NAME and _TAGS for each, as the reference reads them. */
function dogStatsdMogrifiers(env: Env): Mogrifier[] {
  return list(env, 'USE_DOG_STATSD_MOGRIFIERS').map((id) => {
    const prefix = `DOG_STATSD_MOGRIFIER_${id}`;
    const source = str(env, `${prefix}_PATTERN`, '');
    if (source === '') throw new SettingsError(`invalid value for ${prefix}_PATTERN: '' (required for mogrifier ${id})`);
    let pattern: RegExp;
    try {
      pattern = new RegExp(source);
    } catch (err) {
      throw new SettingsError(`invalid value for ${prefix}_PATTERN: '${source}' (${(err as Error).message})`);
    }
    const name = str(env, `${prefix}_NAME`, '');
    if (name === '') throw new SettingsError(`invalid value for ${prefix}_NAME: '' (required for mogrifier ${id})`);
    const tags = stringMap(env, `${prefix}_TAGS`);
    for (const [k, v] of tags) {
      if (k === '' || v === '')
        throw new SettingsError(`invalid value for ${prefix}_TAGS: '${env[`${prefix}_TAGS`]}' (a tag needs a name and a value)`);
    }
    return Object.freeze({ id, pattern, name, tags });
  });
}

/**
 * The reference's stats sink: DISABLE_STATS wins, then USE_DOG_STATSD, then USE_STATSD (true by
 * default). Prometheus is independent of these here (the reference allows one sink at a time).
 * STATSD_PROTOCOL is lyft/gostats' own variable, which the reference's statsd sink reads too.
 */
function statsdSettings(env: Env, flushIntervalMs: number, tags: Array<[string, string]>): StatsdSettings | undefined {
  const disabled = bool(env, 'DISABLE_STATS', false);
  const dog = bool(env, 'USE_DOG_STATSD', false);
  const plain = bool(env, 'USE_STATSD', true);
  const host = str(env, 'STATSD_HOST', 'localhost');
  const statsdPort = port(env, 'STATSD_PORT', 8125);
  const protocol = oneOf<'tcp' | 'udp'>(env, 'STATSD_PROTOCOL', 'tcp', ['tcp', 'udp']);
  const mogrifiers = dogStatsdMogrifiers(env);
  if (disabled || (!dog && !plain)) return undefined;
  return Object.freeze({
    format: dog ? ('dogstatsd' as const) : ('statsd' as const),
    host,
    port: statsdPort,
    // The reference's DogStatsD client sends UDP datagrams.
    protocol: dog ? ('udp' as const) : protocol,
    flushIntervalMs,
    extraTags: tags,
    mogrifiers,
  });
}

/** The stats sinks beside Prometheus (statsd, DogStatsD, the Prometheus mapper) and their switches. */
export function statsSettings(env: Env): StatsSettings {
  const flushIntervalMs = positiveDuration(env, 'STATS_FLUSH_INTERVAL', 10_000);
  const tags = extraTags(env);
  const statsd = statsdSettings(env, flushIntervalMs, tags);
  const mapperYaml = str(env, 'PROMETHEUS_MAPPER_YAML', '');
  return {
    ...(statsd ? { statsd } : {}),
    ...(mapperYaml ? { prometheusMapper: Object.freeze({ path: mapperYaml, flushIntervalMs, extraTags: tags }) } : {}),
    // DISABLE_STATS: no stats at all, as in the reference (whose Prometheus endpoint is a stats sink too).
    ...(bool(env, 'DISABLE_STATS', false) ? { usePrometheus: false } : {}),
    prometheusResponseTimeAsMilliseconds: bool(env, 'PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS', false),
  };
}
