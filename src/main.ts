import cluster from 'node:cluster';
import { AggregatorRegistry } from 'prom-client';
import { startApp, type App } from './app/app';
import { runClusterPrimary, WORKER_READY_MESSAGE, WORKER_STARTUP_FAILED_EXIT } from './app/cluster-primary';
import { FloodgateError } from './base/errors';
import { joinHostPort } from './base/host-port';
import { createLogger, type Logger } from './base/log';
import { loadSettings, type Settings } from './settings/settings';
import { reportSettingsDoubts } from './settings/doubts';
import { reportIneffectiveVariables } from './settings/reference';

/**
 * Starts the app with the SIGTERM/SIGINT handlers already installed: start-up may wait for Redis
 * for ever, and in the image Node is PID 1, which ignores SIGTERM unless a handler is installed.
 * A signal during start-up aborts it (the wait ends, what was opened is closed) and exits 0; one
 * after it stops the app gracefully. A start that fails exits 1, or in a worker
 * WORKER_STARTUP_FAILED_EXIT, so the primary ends the deployment instead of forking again.
 */
async function startServing(settings: Settings, logger: Logger): Promise<App | undefined> {
  const aborting = new AbortController();
  let app: App | undefined;
  const stopApp = (running: App): void => {
    running.stop().then(
      () => process.exit(0),
      (err: unknown) => {
        logger.error('shutdown failed', { error: String(err) });
        process.exit(1);
      },
    );
  };
  const shutdown = (signal: string): void => {
    logger.warn(`received ${signal}, shutting down`);
    // A hard bound in case something refuses to close.
    setTimeout(() => process.exit(1), settings.shutdownGraceMs + 5000).unref();
    if (app === undefined) aborting.abort(new Error(`${signal} during start-up`));
    else stopApp(app);
  };
  // Handlers first: a script that sends SIGTERM as soon as it reads the banner must get the
  // graceful shutdown, and one sent during the wait for Redis must not be ignored.
  process.once('SIGTERM', () => shutdown('SIGTERM'));
  process.once('SIGINT', () => shutdown('SIGINT'));
  try {
    // In a worker the primary serves Prometheus, summing what every worker reports.
    app = await startApp(cluster.isWorker ? { ...settings, usePrometheus: false } : settings, { logger, signal: aborting.signal });
  } catch (err) {
    // startApp closed what it had opened: a stop asked for during start-up is a clean exit.
    if (aborting.signal.aborted) process.exit(0);
    const message = err instanceof FloodgateError ? err.message : String(err);
    process.stderr.write(`floodgate: cannot start: ${message}\n`);
    process.exit(cluster.isWorker ? WORKER_STARTUP_FAILED_EXIT : 1);
  }
  // Aborted while the ports were opening: the start completed, so stop what it started (no banner).
  if (aborting.signal.aborted) {
    stopApp(app);
    return undefined;
  }
  return app;
}

async function main(): Promise<void> {
  let settings;
  try {
    settings = loadSettings();
  } catch (err) {
    // A typo is a common cause of an invalid environment: say so before the error itself.
    reportSettingsDoubts(process.env, undefined, createLogger('WARN', 'text'));
    process.stderr.write(`floodgate: ${(err as Error).message}\n`);
    process.exit(2);
  }
  const logger = createLogger(settings.logLevel, settings.logFormat);
  // Once per deployment, not once per worker.
  if (cluster.isPrimary) {
    reportIneffectiveVariables(process.env, logger);
    reportSettingsDoubts(process.env, settings, logger);
  }
  if (settings.workers > 1 && cluster.isPrimary) {
    await runClusterPrimary(settings, logger);
    return;
  }
  const app = await startServing(settings, logger);
  if (app === undefined) return;
  if (cluster.isWorker) {
    // Constructing one installs prom-client's IPC listener that answers the primary's requests.
    new AggregatorRegistry();
    AggregatorRegistry.setRegistries([app.prometheusRegistry]);
    // The primary opens its metrics port once a worker is ready (no port before Redis answers).
    process.send?.(WORKER_READY_MESSAGE);
  }
  // Printed whatever LOG_LEVEL says: operators and scripts look for this line.
  const banner =
    `serving gRPC on ${settings.grpcUds ?? joinHostPort(settings.grpcHost, app.grpcPort)}, HTTP on ${joinHostPort(settings.host, app.httpPort)}, ` +
    `debug on ${joinHostPort(settings.debugHost, app.debugPort)}` +
    (app.metricsPort !== undefined ? `, metrics on ${joinHostPort(settings.prometheusHost, app.metricsPort)}${settings.prometheusPath}` : '') +
    `, backend ${settings.backendType}, rules from ${settings.xds ? `xDS server ${settings.xds.serverUrl}` : settings.rulesDir}`;
  // Under LOG_FORMAT=json every line on stderr is a JSON object, this one too, for log collectors.
  process.stderr.write(
    settings.logFormat === 'json'
      ? JSON.stringify({ time: new Date().toISOString(), level: 'info', msg: `floodgate: ${banner}` }) + '\n'
      : `floodgate: ${banner}\n`,
  );
}

void main();
