import { RedisProcess } from './redis-process';

export { requireRedisServer, INSTALL_HINT } from './redis-binary';
export { RedisProcess } from './redis-process';
export { startCluster, ClusterNode, CLUSTER_SLOTS } from './redis-cluster';
export type { ClusterOptions, RedisClusterHarness } from './redis-cluster';
export { startSentinel } from './redis-sentinel';
export type { SentinelHarness, SentinelOptions } from './redis-sentinel';
export { startTlsSentinel } from './redis-sentinel-tls';
export type { TlsSentinelHarness, TlsSentinelOptions } from './redis-sentinel-tls';
export { keySlot, crc16 } from './key-slot';

export interface StandaloneOptions {
  readonly password?: string;
  /** Extra redis-server arguments, e.g. `['--maxmemory', '1mb']`. */
  readonly extraArgs?: readonly string[];
}

/**
 * Starts one standalone redis-server on a free loopback port (no persistence, own temp dir).
 * The result has `host`, `port`, `url` (`127.0.0.1:<port>`), `stop()`, `kill(signal)`,
 * `restart()` (same port, empty memory and script cache), `command()` and `logTail()`.
 */
export function startStandalone(options: StandaloneOptions = {}): Promise<RedisProcess> {
  return RedisProcess.start({
    label: 'standalone',
    password: options.password,
    extraArgs: options.extraArgs,
  });
}
