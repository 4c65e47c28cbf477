import { readFileSync } from 'node:fs';
import type { ConnectionOptions } from 'node:tls';
import Redis, { Cluster, type RedisOptions } from 'ioredis';
import { SettingsError } from '../../base/errors';

export type RedisClient = Redis | Cluster;

export type RedisType = 'SINGLE' | 'SENTINEL' | 'CLUSTER';

/** One Redis deployment (the main one, or the per-second one). */
export interface RedisSettings {
  readonly type: RedisType;
  /** SINGLE: host:port or a socket path; SENTINEL: master,host:port,...; CLUSTER: seed list. */
  readonly url: string;
  readonly socketType: 'tcp' | 'unix';
  readonly username?: string;
  readonly password?: string;
  /** REDIS_SENTINEL_AUTH (the reference's name): the sentinels' own credentials, not the master's. */
  readonly sentinelUsername?: string;
  readonly sentinelPassword?: string;
  readonly tls: boolean;
  readonly tlsClientCert?: string;
  readonly tlsClientKey?: string;
  readonly tlsCaCert?: string;
  readonly tlsSkipHostnameVerification: boolean;
  readonly poolSize: number;
  /** Upper bound of any one Redis command, in ms (REDIS_TIMEOUT). */
  readonly timeoutMs: number;
  /** REDIS_PIPELINE_WINDOW in ms; 0 = send at once. */
  readonly pipelineWindowMs: number;
  readonly pipelineLimit: number;
}

function hostPort(spec: string, what: string): { host: string; port: number } {
  const m = /^\[?([^\]]*)\]?:(\d+)$/.exec(spec.trim().replace(/^rediss?:\/\//, ''));
  if (!m) throw new SettingsError(`invalid value for REDIS_URL: '${spec}' (${what} must be host:port)`);
  return { host: m[1] as string, port: Number(m[2]) };
}

function tlsOptions(s: RedisSettings): ConnectionOptions | undefined {
  if (!s.tls) return undefined;
  return {
    ...(s.tlsCaCert ? { ca: readFileSync(s.tlsCaCert) } : {}),
    ...(s.tlsClientCert ? { cert: readFileSync(s.tlsClientCert) } : {}),
    ...(s.tlsClientKey ? { key: readFileSync(s.tlsClientKey) } : {}),
    ...(s.tlsSkipHostnameVerification ? { checkServerIdentity: () => undefined } : {}),
  };
}

/**
 * Connection options that make the client fail fast: no offline queue (a command while
 * disconnected fails at once instead of waiting), no per-command retries, a command timeout of
 * REDIS_TIMEOUT, and reconnection in the background with a short capped backoff.
 */
function baseOptions(s: RedisSettings): RedisOptions {
  const tls = tlsOptions(s);
  return {
    ...(s.username ? { username: s.username } : {}),
    ...(s.password ? { password: s.password } : {}),
    ...(tls ? { tls } : {}),
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: s.timeoutMs > 0 ? s.timeoutMs : undefined,
    connectTimeout: Math.max(100, Math.min(s.timeoutMs || 10_000, 10_000)),
    retryStrategy: (times) => Math.min(50 * times, 1000),
    enableAutoPipelining: true,
    lazyConnect: false,
  };
}

/** How a client other than the limiter's connects. */
export interface ClientExtras {
  /** The orphan scan: connect to a sentinel's replica, keep connections to a cluster's replicas. */
  readonly readReplicas?: boolean;
  /** A command-line tool: connects on connect(), one attempt, no reconnection, so that it fails and says so. */
  readonly once?: boolean;
}

const ONCE: RedisOptions = { lazyConnect: true, retryStrategy: () => null, sentinelRetryStrategy: () => null };
const CLUSTER_ONCE = { lazyConnect: true, clusterRetryStrategy: () => null } as const;

/** The options `extra` adds: to every connection's, and to a cluster client's. */
function extraOptions(extra: ClientExtras): { connection?: RedisOptions; cluster?: typeof CLUSTER_ONCE } {
  return extra.once ? { connection: ONCE, cluster: CLUSTER_ONCE } : {};
}

/**
 * Builds the ioredis client for REDIS_TYPE SINGLE (tcp or unix), SENTINEL or CLUSTER.
 * The limiter uses no extras (see ClientExtras).
 */
export function createRedisClient(s: RedisSettings, extra: ClientExtras = {}): RedisClient {
  const added = extraOptions(extra);
  const options = { ...baseOptions(s), ...added.connection };
  switch (s.type) {
    case 'SINGLE':
      return s.socketType === 'unix' ? new Redis({ ...options, path: s.url }) : new Redis({ ...options, ...hostPort(s.url, 'the address') });
    case 'SENTINEL': {
      const [name, ...sentinels] = s.url.split(',');
      if (!name || sentinels.length === 0) {
        throw new SettingsError(`invalid value for REDIS_URL: '${s.url}' (SENTINEL needs master,host:port[,host:port...])`);
      }
      const tls = tlsOptions(s);
      return new Redis({
        ...options,
        name,
        ...(extra.readReplicas ? { role: 'slave' as const } : {}),
        sentinels: sentinels.map((x) => hostPort(x, 'a sentinel')),
        // The sentinels have their own credentials (REDIS_SENTINEL_AUTH, as the reference);
        // REDIS_AUTH is the master's.
        ...(s.sentinelPassword ? { sentinelPassword: s.sentinelPassword } : {}),
        ...(s.sentinelUsername ? { sentinelUsername: s.sentinelUsername } : {}),
        // ioredis ignores `tls` in sentinel mode unless told: without these, REDIS_TLS would send
        // both AUTH passwords in cleartext to the sentinels and to the master they name.
        ...(tls ? { sentinelTLS: tls, enableTLSForSentinelMode: true } : {}),
      });
    }
    case 'CLUSTER': {
      const seeds = s.url.split(',').map((x) => hostPort(x, 'a cluster seed'));
      return new Cluster(seeds, {
        enableOfflineQueue: false,
        enableAutoPipelining: true,
        // Script calls go out on their own: ioredis follows a MOVED for a pipeline only when all
        // of its commands got one (redis/ioredis#2075), so in a resharding a script call that
        // shared an auto-pipeline with another slot's came back MOVED, and its request failed.
        // The call coalescer already sends one script call per node and tick, so nothing is
        // lost by not pipelining them.
        autoPipeliningIgnoredCommands: ['evalsha', 'eval'],
        scaleReads: extra.readReplicas ? 'slave' : 'master',
        // No retries on a lost node or CLUSTERDOWN: every call has a deadline far below
        // ioredis' retry delays (Envoy's is 20 ms), so a retry only answers a caller that has
        // been answered already (by the failure mode) and would count its hits late. Worse,
        // each retry round re-reads the slot map on a fresh connection (~4 ms of CPU), which
        // during a failover stalled the event loop by tens of ms. The slot map is refreshed by
        // refreshAfterFailure instead, throttled.
        retryDelayOnFailover: 0,
        retryDelayOnClusterDown: 0,
        retryDelayOnTryAgain: 50,
        slotsRefreshTimeout: 1000,
        clusterRetryStrategy: (times) => Math.min(50 * times, 1000),
        redisOptions: options,
        ...added.cluster,
        ...(s.tls ? { dnsLookup: (address, callback) => callback(null, address) } : {}),
      });
    }
  }
}

/** True while the client can serve commands (for a cluster: the slot map is known and usable). */
export function isClientReady(client: RedisClient): boolean {
  return client.status === 'ready';
}

const SLOTS_REFRESH_MIN_INTERVAL_MS = 200;
const lastSlotsRefresh = new WeakMap<Cluster, number>();

/**
 * Called after a command failed: a cluster client re-reads the slot map (at most every 200 ms),
 * so that after a failover the promoted replica is found without a restart. ioredis itself
 * refreshes only on MOVED or while retrying, and retries are off (see createRedisClient).
 */
export function refreshAfterFailure(client: RedisClient): void {
  if (!(client instanceof Cluster) || client.status !== 'ready') return;
  const now = Date.now();
  if (now - (lastSlotsRefresh.get(client) ?? 0) < SLOTS_REFRESH_MIN_INTERVAL_MS) return;
  lastSlotsRefresh.set(client, now);
  client.refreshSlotsCache();
}
