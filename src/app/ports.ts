import type { RuleSet } from '../config/rule-types';
import { grpcServerCredentials } from '../grpc/credentials';
import { GrpcServer } from '../grpc/grpc-server';
import { HealthState } from '../base/health';
import { debugPageRoute, debugStateRoute } from '../http/debug-page';
import { rlconfigRoute } from '../http/debug-routes';
import { allowedHostsOnly } from '../http/host-check';
import { HttpListener, type Route } from '../http/http-listener';
import { metricsRoute } from '../http/metrics-route';
import { healthcheckRoute, jsonRouteFor } from '../http/service-routes';
import type { Limiter } from '../limiter/limiter';
import type { RuleActivity } from '../metrics/rule-activity';
import type { Settings } from '../settings/settings';
import { SettingsError } from '../base/errors';
import { policyRoute } from '../http/policy-route';
import { PolicyEngine } from '../policy/policy-engine';
import type { RateLimitHandler } from '../service/rate-limit-handler';
import { joinHostPort } from '../base/host-port';

import type { Running, Core } from './running';

// The ports of a running app: gRPC, HTTP, debug and Prometheus, each refused by name when taken.

export interface Served {
  readonly service: RateLimitHandler;
  readonly limiter: Limiter;
  readonly policy: PolicyEngine;
  readonly health: HealthState;
  readonly rules: () => RuleSet | undefined;
  /** Per-rule totals, for the debug page. */
  readonly activity: RuleActivity;
}

export interface Ports {
  readonly grpcPort: number;
  readonly httpPort: number;
  readonly debugPort: number;
  /** Absent when USE_PROMETHEUS is off. */
  readonly metricsPort?: number;
}

/** Where a port is configured: the variable (GRPC_PORT, PORT...) and its value, for messages. */
interface PortSetting {
  readonly variable: string;
  readonly value: string | number;
}

/** Waits for `listening`; a port in use fails the start naming its variable (`GRPC_PORT 8081 is in use`). */
async function bound(listening: Promise<number>, { variable, value }: PortSetting): Promise<number> {
  try {
    return await listening;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EADDRINUSE') throw new SettingsError(`${variable} ${value} is in use`);
    throw err;
  }
}

async function listenHttp(
  running: Running,
  routes: Record<string, Route>,
  settings: Settings,
  address: { host: string; port: number } & PortSetting,
): Promise<number> {
  const listener = new HttpListener(routes, settings.httpLimits);
  const port = await bound(listener.listen(address.host, address.port), address);
  running.listeners.push(listener);
  return port;
}

/** gRPC, then HTTP, debug and Prometheus; each one joins `running` as soon as it listens. */
export async function openPorts(
  settings: Settings,
  { logger, metrics, prometheus, prometheusRegistry, operator }: Core,
  { service, policy, health, rules, limiter, activity }: Served,
  running: Running,
): Promise<Ports> {
  running.grpcServer = new GrpcServer({
    service,
    health,
    metrics,
    logger,
    defaultDeadlineMs: settings.defaultDeadlineMs,
    limits: settings.grpcLimits,
    maxConnectionAgeMs: settings.grpcMaxConnectionAgeMs,
    maxConnectionAgeGraceMs: settings.grpcMaxConnectionAgeGraceMs,
    rlsHandler: settings.grpcRlsHandler,
    ...(settings.grpcTls?.clientSan ? { requiredClientSan: settings.grpcTls.clientSan } : {}),
  });
  const grpcAddress = settings.grpcUds ? `unix:${settings.grpcUds}` : joinHostPort(settings.grpcHost, settings.grpcPort);
  const grpcPort = await bound(
    running.grpcServer.listen(grpcAddress, await grpcServerCredentials(settings.grpcTls, settings.grpcLimits.maxConnectionIdleMs, logger)),
    settings.grpcUds ? { variable: 'GRPC_UDS', value: settings.grpcUds } : { variable: 'GRPC_PORT', value: settings.grpcPort },
  );
  const httpRoutes = {
    '/healthcheck': healthcheckRoute(health),
    '/json': jsonRouteFor(
      {
        defaultDeadlineMs: settings.defaultDeadlineMs,
        maxBodyBytes: settings.httpLimits.maxBodyBytes,
        grpcRequiresClientCerts: settings.grpcTls?.clientCaCert !== undefined,
        withoutClientCert: settings.httpJsonWithoutClientCert,
      },
      service,
    ),
  };
  const httpPort = await listenHttp(running, httpRoutes, settings, {
    host: settings.host,
    port: settings.port,
    variable: 'PORT',
    value: settings.port,
  });
  // Only the Host names an operator uses: a DNS-rebinding page gets nothing (issue 18).
  const debugRoutes = allowedHostsOnly(
    {
      '/rlconfig': rlconfigRoute(rules),
      '/metrics': metricsRoute(prometheusRegistry),
      '/': debugPageRoute(),
      '/debug/state': debugStateRoute({
        rules,
        registry: prometheus.registry,
        backendType: settings.backendType,
        backendHealthy: () => limiter.isHealthy(),
        serving: () => health.isServing(),
        breakers: () => operator.breakerStates(),
        lastLoad: () => operator.lastLoad,
        lastLoadError: () => operator.lastLoadError,
        activity,
      }),
      '/policy': policyRoute(rules, policy),
    },
    settings.debugHost,
  );
  const debugPort = await listenHttp(running, debugRoutes, settings, {
    host: settings.debugHost,
    port: settings.debugPort,
    variable: 'DEBUG_PORT',
    value: settings.debugPort,
  });
  if (!settings.usePrometheus) return { grpcPort, httpPort, debugPort };
  const metricsRoutes = { [settings.prometheusPath]: metricsRoute(prometheusRegistry) };
  const metricsPort = await listenHttp(running, metricsRoutes, settings, {
    host: settings.prometheusHost,
    port: settings.prometheusPort,
    variable: 'PROMETHEUS_ADDR',
    value: joinHostPort(settings.prometheusHost, settings.prometheusPort),
  });
  return { grpcPort, httpPort, debugPort, metricsPort };
}

export function reportHealthChanges(health: HealthState, { logger, metrics }: Core): void {
  let serving = health.isServing();
  let backend = health.isBackendHealthy();
  metrics.setBackendHealthy(backend);
  health.on('change', () => {
    if (backend !== health.isBackendHealthy()) {
      backend = !backend;
      metrics.setBackendHealthy(backend);
      logger.warn(backend ? 'backend: reachable again' : 'backend: unreachable; calls follow BACKEND_FAILURE_MODE');
    }
    if (serving !== health.isServing()) {
      serving = !serving;
      logger.warn(serving ? 'health: SERVING' : 'health: NOT_SERVING');
    }
  });
}
