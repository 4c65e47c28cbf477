import cluster from 'node:cluster';
import { AggregatorRegistry } from 'prom-client';
import { startApp } from './app';
import { runClusterPrimary } from './cluster-primary';
import { FloodgateError } from './errors';
import { joinHostPort } from './host-port';
import { createLogger } from './log';
import { loadSettings } from './settings';
import { reportSettingsDoubts } from './settings-doubts';
import { reportIneffectiveVariables } from './settings-reference';

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
  let app;
  try {
    // In a worker the primary serves Prometheus, summing what every worker reports.
    app = await startApp(cluster.isWorker ? { ...settings, usePrometheus: false } : settings, { logger });
  } catch (err) {
    const message = err instanceof FloodgateError ? err.message : String(err);
    process.stderr.write(`floodgate: cannot start: ${message}\n`);
    process.exit(1);
  }
  if (cluster.isWorker) {
    // Constructing one installs prom-client's IPC listener that answers the primary's requests.
    new AggregatorRegistry();
    AggregatorRegistry.setRegistries([app.prometheusRegistry]);
  }
  // Handlers first: a script that sends SIGTERM as soon as it reads the line below must get
  // the graceful shutdown.
  const shutdown = (signal: string): void => {
    logger.warn(`received ${signal}, shutting down`);
    // A hard bound in case something refuses to close.
    setTimeout(() => process.exit(1), settings.shutdownGraceMs + 5000).unref();
    app.stop().then(
      () => process.exit(0),
      (err: unknown) => {
        logger.error('shutdown failed', { error: String(err) });
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', () => shutdown('SIGTERM'));
  process.once('SIGINT', () => shutdown('SIGINT'));
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
