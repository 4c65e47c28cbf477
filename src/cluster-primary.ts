import cluster, { type Worker } from 'node:cluster';
import { AggregatorRegistry } from 'prom-client';
import { HttpListener } from './http/http-listener';
import type { Logger } from './log';
import type { Settings } from './settings';

// A worker that dies is replaced, but a crash loop is not fed forever.
const MAX_RESTARTS_PER_MINUTE = 10;

/**
 * WORKERS > 1: this process forks the workers that serve the shared ports (Node's cluster
 * module hands each new connection to a worker), replaces a worker that dies, serves the
 * Prometheus endpoint with the metrics of all workers summed, and on SIGTERM passes the signal
 * on and exits once every worker has drained.
 */
export async function runClusterPrimary(settings: Settings, logger: Logger): Promise<void> {
  let stopping = false;
  const restarts: number[] = [];
  const fork = (): Worker => cluster.fork();
  cluster.on('exit', (worker, code, signal) => {
    if (stopping) {
      if (Object.keys(cluster.workers ?? {}).length === 0) process.exit(0);
      return;
    }
    const now = Date.now();
    while (restarts.length > 0 && (restarts[0] as number) < now - 60_000) restarts.shift();
    if (restarts.length >= MAX_RESTARTS_PER_MINUTE) {
      logger.error(`worker ${worker.process.pid} exited (${signal ?? code}); too many restarts, giving up`);
      process.exit(1);
    }
    restarts.push(now);
    logger.error(`worker ${worker.process.pid} exited (${signal ?? code}); starting a new one`);
    fork();
  });
  for (let i = 0; i < settings.workers; i++) fork();

  let metricsPort: number | undefined;
  let prometheus: HttpListener | undefined;
  if (settings.usePrometheus) {
    const aggregator = new AggregatorRegistry();
    prometheus = new HttpListener(
      {
        [settings.prometheusPath]: (_req, res) => {
          aggregator.clusterMetrics().then(
            (text) => res.writeHead(200, { 'content-type': aggregator.contentType }).end(text),
            (err: unknown) => res.writeHead(500, { 'content-type': 'text/plain' }).end(String(err)),
          );
        },
      },
      settings.httpLimits,
    );
    metricsPort = await prometheus.listen(settings.prometheusHost, settings.prometheusPort);
  }
  process.stderr.write(
    `floodgate: primary ${process.pid} runs ${settings.workers} workers` +
      (metricsPort !== undefined ? `, metrics of all workers on ${settings.prometheusHost}:${metricsPort}${settings.prometheusPath}` : '') +
      '\n',
  );

  const shutdown = (signal: NodeJS.Signals): void => {
    if (stopping) return;
    stopping = true;
    logger.warn(`received ${signal}, stopping ${settings.workers} workers`);
    setTimeout(() => process.exit(1), settings.shutdownGraceMs + 5000).unref();
    void prometheus?.close();
    const workers = Object.values(cluster.workers ?? {});
    if (workers.length === 0) process.exit(0);
    for (const worker of workers) worker?.process.kill('SIGTERM');
  };
  process.once('SIGTERM', () => shutdown('SIGTERM'));
  process.once('SIGINT', () => shutdown('SIGINT'));
}
