import cluster, { type Worker } from 'node:cluster';
import { AggregatorRegistry } from 'prom-client';
import { HttpListener } from '../http/http-listener';
import type { Logger } from '../base/log';
import type { Settings } from '../settings/settings';

// A worker that dies is replaced, but a crash loop is not fed forever.
const MAX_RESTARTS_PER_MINUTE = 10;

/**
 * A worker's exit code when its start failed (e.g. Redis not reachable within
 * REDIS_STARTUP_MAX_ELAPSED_TIME): not a crash to replace, the start of the deployment failed.
 */
export const WORKER_STARTUP_FAILED_EXIT = 3;

/** What a worker sends the primary once its ports are open. */
export const WORKER_READY_MESSAGE = { floodgate: 'worker-ready' } as const;

function isReadyMessage(message: unknown): boolean {
  return typeof message === 'object' && message !== null && (message as { floodgate?: unknown }).floodgate === WORKER_READY_MESSAGE.floodgate;
}

/** The Prometheus endpoint of the primary: every worker's metrics, summed. */
async function openMetrics(settings: Settings): Promise<{ listener: HttpListener; port: number }> {
  const aggregator = new AggregatorRegistry();
  const listener = new HttpListener(
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
  return { listener, port: await listener.listen(settings.prometheusHost, settings.prometheusPort) };
}

/**
 * WORKERS > 1: this process forks the workers that serve the shared ports (Node's cluster
 * module hands each new connection to a worker), replaces a worker that dies, serves the
 * Prometheus endpoint with the metrics of all workers summed, and on SIGTERM passes the signal
 * on and exits once every worker has drained. Like a single process it opens no port before
 * Redis answers: the Prometheus port opens once the first worker reports ready, and a worker
 * whose start fails (WORKER_STARTUP_FAILED_EXIT) ends the deployment with exit 1.
 */
export async function runClusterPrimary(settings: Settings, logger: Logger): Promise<void> {
  let stopping = false;
  let exitCode = 0;
  let prometheus: HttpListener | undefined;
  const restarts: number[] = [];
  const fork = (): Worker => cluster.fork();

  // Handlers before anything else: workers may wait for Redis for ever, and this may be PID 1.
  const stopAll = (reason: string, code: number): void => {
    if (stopping) return;
    stopping = true;
    exitCode = code;
    logger.warn(`${reason}, stopping ${settings.workers} workers`);
    setTimeout(() => process.exit(code === 0 ? 1 : code), settings.shutdownGraceMs + 5000).unref();
    void prometheus?.close();
    const workers = Object.values(cluster.workers ?? {});
    if (workers.length === 0) process.exit(code);
    for (const worker of workers) worker?.process.kill('SIGTERM');
  };
  process.once('SIGTERM', () => stopAll('received SIGTERM', 0));
  process.once('SIGINT', () => stopAll('received SIGINT', 0));

  cluster.on('exit', (worker, code, signal) => {
    if (!stopping && code === WORKER_STARTUP_FAILED_EXIT) {
      logger.error(`worker ${worker.process.pid} could not start; the start fails`);
      stopAll('start failed', 1);
    }
    if (stopping) {
      if (Object.keys(cluster.workers ?? {}).length === 0) process.exit(exitCode);
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

  let metricsOpening = false;
  if (settings.usePrometheus) {
    cluster.on('message', (_worker, message: unknown) => {
      if (metricsOpening || stopping || !isReadyMessage(message)) return;
      metricsOpening = true;
      openMetrics(settings).then(
        ({ listener, port }) => {
          prometheus = listener;
          if (stopping) void listener.close();
          else process.stderr.write(`floodgate: metrics of all workers on ${settings.prometheusHost}:${port}${settings.prometheusPath}\n`);
        },
        (err: unknown) => {
          logger.error(`cannot open the metrics port: ${String(err)}`);
          stopAll('start failed', 1);
        },
      );
    });
  }
  for (let i = 0; i < settings.workers; i++) fork();
  process.stderr.write(
    `floodgate: primary ${process.pid} runs ${settings.workers} workers` +
      (settings.usePrometheus ? '; the metrics of all workers are served once one is ready' : '') +
      '\n',
  );
  await Promise.resolve();
}
