import { Cluster } from 'ioredis';
import { Gauge, type Registry } from 'prom-client';
import type { Logger } from '../base/log';
import { createRedisClient, type RedisClient, type RedisSettings } from '../limiter/redis/redis-client';
import type { ReferenceDomains } from './key-shape';
import { scanCounterKeys, scanTargets, shardReplicas } from './scan-keys';

/** ORPHAN_SCAN_*: the background scan for counter keys without a TTL. */
export interface OrphanScanSettings {
  /** Time from the end of one full scan to the start of the next. */
  readonly intervalMs: number;
  /** SCAN COUNT per call. */
  readonly count: number;
  /** Pause between two SCAN calls on one node. */
  readonly pauseMs: number;
  /** Scan replicas (cluster replicas, sentinel replicas) instead of primaries. */
  readonly replicas: boolean;
}

const SAMPLE_SIZE = 10;
// Bounds one pass however large the keyspace: at COUNT 1000 that is a billion keys examined.
const MAX_SCAN_CALLS = 1_000_000;

/**
 * The background orphan-key scan (ORPHAN_SCAN_INTERVAL): walks the counter keys with a paced,
 * COUNT-bounded SCAN on its own connection, read-only, on replicas when asked, and exports
 * `floodgate_redis_keys_without_ttl` (and `..._unknown_shape`). A scan that finds keys
 * without a TTL logs a sample of them.
 */
export class OrphanScan {
  private readonly client: RedisClient;
  private readonly withoutTtl: Gauge;
  private readonly unknownShape: Gauge;
  private readonly lastRun: Gauge;
  private readonly abort = new AbortController();
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;

  constructor(
    private readonly options: {
      redis: RedisSettings;
      scan: OrphanScanSettings;
      prefix: string;
      /**
       * REDIS_KEY_LAYOUT=reference: the reference's keys of these domains (the rules in force at
       * each pass) are counters too (issue 30); no rules, no key taken for the reference's.
       */
      referenceDomains?: () => ReferenceDomains;
      registry: Registry;
      logger: Logger;
    },
  ) {
    // Its own connection, so a scan never queues behind (or ahead of) the request path's calls.
    this.client = createRedisClient(options.redis, { readReplicas: options.scan.replicas });
    this.client.on('error', () => undefined); // the limiter's connection logs Redis trouble already
    const registers = [options.registry];
    // With WORKERS > 1 the primary merges the workers' metrics; only one worker scans (see
    // app.ts), and 'max' keeps the others' zero from hiding its figure.
    const aggregator = 'max' as const;
    this.withoutTtl = new Gauge({
      name: 'floodgate_redis_keys_without_ttl',
      help: 'Counter keys without a TTL found by the last orphan scan',
      registers,
      aggregator,
    });
    this.unknownShape = new Gauge({
      name: 'floodgate_redis_keys_unknown_shape',
      help: 'Keys under the counter prefix of no known shape, found by the last orphan scan',
      registers,
      aggregator,
    });
    this.lastRun = new Gauge({
      name: 'floodgate_redis_orphan_scan_last_success_timestamp_seconds',
      help: 'When the last orphan scan finished',
      registers,
      aggregator,
    });
  }

  start(): void {
    this.schedule(0);
  }

  async close(): Promise<void> {
    this.abort.abort();
    clearTimeout(this.timer);
    await this.running;
    this.client.disconnect();
  }

  private schedule(delayMs: number): void {
    if (this.abort.signal.aborted) return;
    this.timer = setTimeout(() => {
      this.running = this.runOnce().finally(() => this.schedule(this.options.scan.intervalMs));
    }, delayMs);
    this.timer.unref();
  }

  /** One full pass; errors are logged, the next pass comes at the interval anyway. */
  async runOnce(): Promise<void> {
    const { scan, prefix, logger } = this.options;
    try {
      await ready(this.client, this.abort.signal);
      if (this.client instanceof Cluster && scan.replicas && shardReplicas(this.client).missing > 0) {
        // Replicas join the slot map after their first sync: look again before this pass.
        const cluster = this.client;
        await new Promise<void>((resolve) => cluster.refreshSlotsCache(() => resolve()));
        const { missing } = shardReplicas(cluster);
        // A shard without a replica is not counted: its primary is left alone, and the gauge says less.
        if (missing > 0) logger.warn(`orphan scan: ${missing} shard(s) have no replica yet; their keys are not counted in this pass`);
      }
      const nodes = scanTargets(this.client, scan.replicas);
      if (nodes.length === 0) throw new Error('ORPHAN_SCAN_REPLICAS is set but the cluster has no replica yet; primaries are left alone');
      const report = await scanCounterKeys(nodes, this.client, {
        prefix,
        count: scan.count,
        pauseMs: scan.pauseMs,
        maxCalls: MAX_SCAN_CALLS,
        ...(this.options.referenceDomains !== undefined ? { referenceDomains: this.options.referenceDomains() } : {}),
        maxFindings: SAMPLE_SIZE,
        signal: this.abort.signal,
      });
      if (this.abort.signal.aborted) return;
      this.withoutTtl.set(report.withoutTtl);
      this.unknownShape.set(report.unknownShape);
      this.lastRun.set(Date.now() / 1000);
      if (report.withoutTtl > 0 || report.unknownShape > 0) {
        logger.warn(
          `orphan scan: ${report.withoutTtl} counter keys without TTL, ${report.unknownShape} of unknown shape (run 'floodgate keys --fix'${this.options.referenceDomains !== undefined ? ", with --fix-reference for the reference's keys" : ''})`,
          {
            scanned: report.scanned,
            sample: report.findings.map((f) => f.key),
          },
        );
      } else {
        logger.info('orphan scan: every counter key has a TTL', { scanned: report.scanned });
      }
    } catch (err) {
      if (!this.abort.signal.aborted) logger.warn(`orphan scan failed: ${(err as Error).message}`);
    }
  }
}

/** Resolves once the client is ready (bounded), so a pass does not fail on a fresh connection. */
async function ready(client: RedisClient, signal: AbortSignal): Promise<void> {
  for (let i = 0; i < 100 && client.status !== 'ready' && !signal.aborted; i++) await new Promise((r) => setTimeout(r, 50));
  if (client.status !== 'ready') throw new Error(`redis connection is ${client.status}`);
}
