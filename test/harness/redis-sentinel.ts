import { requireRedisServer } from './redis-binary';
import { HOST, RedisProcess, waitForServer } from './redis-process';
import { parseInfo, type RespValue } from './resp-client';

const READY_TIMEOUT_MS = 20_000;
const FAILOVER_TIMEOUT_MS = 20_000;

export interface SentinelOptions {
  readonly masterName?: string;
  /** 1 (default) or more sentinel processes; the quorum is a majority of them. */
  readonly sentinelCount?: number;
  /** Extra redis-server arguments for the master and the replica. */
  readonly extraArgs?: readonly string[];
}

/** A master, one replica and the sentinels that watch them. */
export interface SentinelHarness {
  /** `127.0.0.1:p1[,127.0.0.1:p2...]` (REDIS_URL style for sentinel mode). */
  readonly sentinels: string;
  /** The same as `{ host, port }` objects, e.g. for ioredis `{ sentinels, name }`. */
  readonly sentinelAddresses: readonly { host: string; port: number }[];
  readonly masterName: string;
  readonly sentinelNodes: readonly RedisProcess[];
  /** The data nodes (initial master first). */
  readonly dataNodes: readonly RedisProcess[];
  /** The data node that is master now. */
  master(): RedisProcess;
  /** The data node that is replica now. */
  replica(): RedisProcess;
  /**
   * SIGKILLs the master and waits (bounded, default 20 s) until every running sentinel names the
   * replica as master and the replica reports role master; returns the new master.
   */
  killMasterAndWaitForFailover(timeoutMs?: number): Promise<RedisProcess>;
  stop(): Promise<void>;
}

/** Starts a master, a replica of it and `sentinelCount` sentinels monitoring it as `masterName`. */
export async function startSentinel(options: SentinelOptions = {}): Promise<SentinelHarness> {
  requireRedisServer();
  const masterName = options.masterName ?? 'mymaster';
  const count = options.sentinelCount ?? 1;
  const started: RedisProcess[] = [];
  try {
    const master = await RedisProcess.start({ label: 'sentinel master', extraArgs: options.extraArgs });
    started.push(master);
    const replica = await RedisProcess.start({
      label: 'sentinel replica',
      config: [`replicaof ${HOST} ${master.port}`],
      extraArgs: options.extraArgs,
    });
    started.push(replica);
    const quorum = Math.floor(count / 2) + 1;
    const sentinelNodes = await Promise.all(
      Array.from({ length: count }, (_, i) =>
        RedisProcess.start({
          mode: 'sentinel',
          label: `sentinel ${i + 1}`,
          config: [
            `sentinel monitor ${masterName} ${HOST} ${master.port} ${quorum}`,
            `sentinel down-after-milliseconds ${masterName} 1000`,
            `sentinel failover-timeout ${masterName} 5000`,
            `sentinel parallel-syncs ${masterName} 1`,
          ],
        }).then((s) => (started.push(s), s)),
      ),
    );
    const harness = new SentinelHarnessImpl(masterName, master, replica, sentinelNodes);
    await harness.waitForReady();
    return harness;
  } catch (err) {
    await Promise.all(started.map((s) => s.stop()));
    throw err;
  }
}

function fieldsOf(entry: RespValue): Map<string, string> {
  const list = Array.isArray(entry) ? entry.map(String) : [];
  const fields = new Map<string, string>();
  for (let i = 0; i + 1 < list.length; i += 2) fields.set(list[i] ?? '', list[i + 1] ?? '');
  return fields;
}

class SentinelHarnessImpl implements SentinelHarness {
  readonly sentinels: string;
  readonly sentinelAddresses: readonly { host: string; port: number }[];
  readonly dataNodes: readonly RedisProcess[];
  private current: RedisProcess;
  private standby: RedisProcess;

  constructor(
    readonly masterName: string,
    master: RedisProcess,
    replica: RedisProcess,
    readonly sentinelNodes: readonly RedisProcess[],
  ) {
    this.current = master;
    this.standby = replica;
    this.dataNodes = [master, replica];
    this.sentinels = sentinelNodes.map((s) => s.url).join(',');
    this.sentinelAddresses = sentinelNodes.map((s) => ({ host: HOST, port: s.port }));
  }

  master(): RedisProcess {
    return this.current;
  }

  replica(): RedisProcess {
    return this.standby;
  }

  /** Every sentinel knows the master, the healthy replica and the other sentinels. */
  async waitForReady(): Promise<void> {
    const all = [...this.dataNodes, ...this.sentinelNodes];
    await waitForServer(all, 'the replica to sync', () => this.replicaInSync(), READY_TIMEOUT_MS);
    await waitForServer(
      all,
      `every sentinel to know ${this.masterName}, its replica and its peers`,
      async () => {
        for (const sentinel of this.sentinelNodes) {
          if ((await this.masterPortSeenBy(sentinel)) !== this.current.port) return false;
          const replicas = await sentinel.command('SENTINEL', 'REPLICAS', this.masterName);
          const healthy = (Array.isArray(replicas) ? replicas : [])
            .map(fieldsOf)
            .filter((r) => r.get('flags') === 'slave' && r.get('master-link-status') === 'ok');
          if (healthy.length < 1) return false;
          const peers = await sentinel.command('SENTINEL', 'SENTINELS', this.masterName);
          if (!Array.isArray(peers) || peers.length !== this.sentinelNodes.length - 1) return false;
        }
        return true;
      },
      READY_TIMEOUT_MS,
    );
  }

  async killMasterAndWaitForFailover(timeoutMs = FAILOVER_TIMEOUT_MS): Promise<RedisProcess> {
    const [oldMaster, promoted] = [this.current, this.standby];
    await oldMaster.kill('SIGKILL');
    await waitForServer(
      [promoted, ...this.sentinelNodes],
      `sentinels to promote ${promoted.url} after ${oldMaster.url} was killed`,
      async () => {
        if (parseInfo(await promoted.command('INFO', 'replication')).get('role') !== 'master') return false;
        for (const sentinel of this.sentinelNodes.filter((s) => s.isRunning())) {
          if ((await this.masterPortSeenBy(sentinel)) !== promoted.port) return false;
        }
        return true;
      },
      timeoutMs,
    );
    this.current = promoted;
    this.standby = oldMaster;
    return promoted;
  }

  async stop(): Promise<void> {
    await Promise.all([...this.sentinelNodes, ...this.dataNodes].map((s) => s.stop()));
  }

  private async masterPortSeenBy(sentinel: RedisProcess): Promise<number | undefined> {
    const addr = await sentinel.command('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', this.masterName);
    return Array.isArray(addr) ? Number(addr[1]) : undefined;
  }

  private async replicaInSync(): Promise<boolean> {
    const info = parseInfo(await this.standby.command('INFO', 'replication'));
    return info.get('role') === 'slave' && info.get('master_link_status') === 'up';
  }
}
