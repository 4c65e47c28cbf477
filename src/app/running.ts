import type { Registry } from 'prom-client';
import { GrpcServer } from '../grpc/grpc-server';
import { HealthState } from '../base/health';
import { HttpListener } from '../http/http-listener';
import type { Limiter } from '../limiter/limiter';
import type { Logger } from '../base/log';
import { PrometheusMetrics, type ServiceMetrics } from '../metrics/metrics';
import { StatsdMetrics } from '../metrics/statsd-metrics';
import { OperatorMetrics } from '../metrics/operator-metrics';
import { OrphanScan } from '../redis-keys/orphan-scan';
import { PolicyEngine } from '../policy/policy-engine';
import type { Tracing } from '../tracing/start-tracing';

// What a starting or running app holds, and the one way it is closed again.

/**
 * Everything startApp has started so far. Both a start that fails partway and stop() close it
 * through closeRunning, so what was opened is closed whichever way the app ends.
 */
export interface Running {
  /** The rule files' watcher, or the xDS client (CONFIG_TYPE=GRPC_XDS_SOTW). */
  rulesSource?: { close(): void };
  limiter?: Limiter;
  policy?: PolicyEngine;
  health?: HealthState;
  grpcServer?: GrpcServer;
  orphanScan?: OrphanScan;
  tracing?: Tracing;
  /** The event-loop delay and GC pause sources of floodgate_event_loop_delay_seconds and floodgate_gc_pause_seconds. */
  runtimeMetrics?: { close(): void };
  readonly listeners: HttpListener[];
  /** statsd and the PROMETHEUS_MAPPER_YAML sink: each sends what it counted when closed. */
  readonly stats: StatsdMetrics[];
}

/** NOT_SERVING first, then calls in flight finish (bounded by `graceMs`), then the rest closes. */
export async function closeRunning(running: Running, graceMs: number): Promise<void> {
  running.health?.markShuttingDown();
  running.rulesSource?.close();
  await running.grpcServer?.shutdown(graceMs);
  await Promise.all(running.listeners.map((listener) => listener.close()));
  running.health?.close();
  await running.orphanScan?.close();
  await running.limiter?.close();
  await running.policy?.close();
  await running.tracing?.shutdown();
  running.runtimeMetrics?.close();
  // Last, so that the final flush carries everything counted until the end.
  await Promise.all(running.stats.map((s) => s.close()));
}

export interface Core {
  readonly logger: Logger;
  /** Every sink: Prometheus, and statsd when it is on. */
  readonly metrics: ServiceMetrics;
  readonly prometheus: PrometheusMetrics;
  /** What the Prometheus routes serve: floodgate's own series, or those of PROMETHEUS_MAPPER_YAML. */
  readonly prometheusRegistry: Registry;
  /** Operator metrics, registered with `prometheus`. */
  readonly operator: OperatorMetrics;
}
