import { execFile } from 'node:child_process';
import { REDIS_CLI_BIN, requireRedisServer } from './redis-binary';
import { HOST, RedisProcess, waitForServer } from './redis-process';
import { parseInfo, type RespValue } from './resp-client';

export const CLUSTER_SLOTS = 16384;
const CREATE_TIMEOUT_MS = 60_000;
const HEALTHY_TIMEOUT_MS = 30_000;
// A busy machine may take a while longer to elect and promote a replica.
const FAILOVER_TIMEOUT_MS = 45_000;

export interface ClusterOptions {
  readonly masters?: number;
  readonly replicasPerMaster?: number;
  /** Extra redis-server arguments for every node. */
  readonly extraArgs?: readonly string[];
}

/** One node of a test cluster. `id`, `role` and `masterId` follow the last topology refresh. */
export class ClusterNode {
  id = '';
  role: 'master' | 'replica' = 'master';
  /** Node id of this replica's master; undefined for masters. */
  masterId: string | undefined;

  constructor(readonly server: RedisProcess) {}

  get host(): string {
    return this.server.host;
  }
  get port(): number {
    return this.server.port;
  }
  get url(): string {
    return this.server.url;
  }
  isRunning(): boolean {
    return this.server.isRunning();
  }
  command(...args: (string | number)[]): Promise<RespValue> {
    return this.server.command(...args);
  }
  /** Default SIGKILL: the node vanishes as in a crash. */
  kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    return this.server.kill(signal);
  }
  /** Same port and nodes.conf: the node rejoins the cluster (a killed master comes back as replica). */
  restart(): Promise<void> {
    return this.server.restart();
  }
  logTail(lines?: number): string {
    return this.server.logTail(lines);
  }
}

/** A running Redis Cluster of real processes. */
export interface RedisClusterHarness {
  readonly nodes: readonly ClusterNode[];
  /** `127.0.0.1:p1,127.0.0.1:p2,...` over all nodes (REDIS_URL style for cluster mode). */
  readonly seeds: string;
  /** The same as `{ host, port }` objects, e.g. for `new Redis.Cluster(startupNodes)`. */
  readonly startupNodes: readonly { host: string; port: number }[];
  /** Running masters as of the last topology refresh. */
  masters(): ClusterNode[];
  /** Running replicas as of the last topology refresh. */
  replicas(): ClusterNode[];
  replicaOf(master: ClusterNode): ClusterNode | undefined;
  /** Re-reads roles from the running nodes. */
  refreshTopology(): Promise<void>;
  /** Waits until every running node reports cluster_state:ok, all slots served, replicas in sync. */
  waitForHealthy(timeoutMs?: number): Promise<void>;
  /**
   * SIGKILLs `master`, waits until its replica reports role master and the cluster is ok again
   * (bounded, default 15 s), and returns the promoted node.
   */
  killMasterAndWaitForPromotion(master: ClusterNode, timeoutMs?: number): Promise<ClusterNode>;
  /** Stops every node and removes their temp dirs. */
  stop(): Promise<void>;
}

/** Starts `masters × (1 + replicasPerMaster)` nodes and joins them with `redis-cli --cluster create`. */
export async function startCluster(options: ClusterOptions = {}): Promise<RedisClusterHarness> {
  requireRedisServer();
  const masterCount = options.masters ?? 3;
  const replicasPerMaster = options.replicasPerMaster ?? 1;
  if (masterCount < 3) throw new Error('redis-cli --cluster create needs at least 3 masters');
  const total = masterCount * (1 + replicasPerMaster);
  const started = await Promise.allSettled(
    Array.from({ length: total }, (_, i) =>
      RedisProcess.start({
        cluster: true,
        label: `cluster node ${i + 1}`,
        config: ['cluster-node-timeout 1000', 'cluster-replica-validity-factor 0'],
        extraArgs: options.extraArgs,
      }),
    ),
  );
  const servers = started.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  const failed = started.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) {
    await Promise.all(servers.map((s) => s.stop()));
    throw failed.reason;
  }
  const harness = new ClusterHarness(
    servers.map((s) => new ClusterNode(s)),
    masterCount,
  );
  try {
    await createCluster(servers, replicasPerMaster);
    await harness.waitForHealthy();
  } catch (err) {
    await harness.stop();
    throw err;
  }
  return harness;
}

function createCluster(servers: readonly RedisProcess[], replicas: number): Promise<void> {
  const args = ['--cluster', 'create', ...servers.map((s) => s.url)];
  args.push('--cluster-replicas', String(replicas), '--cluster-yes');
  return new Promise((resolve, reject) => {
    execFile(REDIS_CLI_BIN, args, { timeout: CREATE_TIMEOUT_MS }, (err, stdout, stderr) => {
      // redis-cli reports some failures with exit code 0; its summary line is the real verdict.
      if (!err && /All 16384 slots covered/.test(stdout)) return resolve();
      const tail = (stdout + stderr).trimEnd().split('\n').slice(-30).join('\n');
      reject(new Error(`redis-cli ${args.join(' ')} failed: ${err?.message ?? 'no coverage'}\n${tail}`));
    });
  });
}

interface NodeLine {
  id: string;
  port: number;
  flags: string[];
  masterId: string | undefined;
  hasSlots: boolean;
}

/** Parses CLUSTER NODES (`<id> <ip:port@cport[,host]> <flags> <master> ... <slots...>`). */
function parseClusterNodes(text: RespValue): NodeLine[] {
  return String(text)
    .trim()
    .split('\n')
    .filter((line) => line.length > 0)
    .map((line) => {
      const f = line.split(' ');
      const address = f[1] ?? '';
      const port = Number(address.slice(address.lastIndexOf(':', address.indexOf('@')) + 1, address.indexOf('@')));
      return {
        id: f[0] ?? '',
        port,
        flags: (f[2] ?? '').split(','),
        masterId: f[3] === '-' ? undefined : f[3],
        hasSlots: f.length > 8,
      };
    });
}

class ClusterHarness implements RedisClusterHarness {
  readonly seeds: string;
  readonly startupNodes: readonly { host: string; port: number }[];

  constructor(
    readonly nodes: readonly ClusterNode[],
    private readonly masterCount: number,
  ) {
    this.seeds = nodes.map((n) => n.url).join(',');
    this.startupNodes = nodes.map((n) => ({ host: HOST, port: n.port }));
  }

  masters(): ClusterNode[] {
    return this.nodes.filter((n) => n.isRunning() && n.role === 'master');
  }

  replicas(): ClusterNode[] {
    return this.nodes.filter((n) => n.isRunning() && n.role === 'replica');
  }

  replicaOf(master: ClusterNode): ClusterNode | undefined {
    return this.replicas().find((n) => n.masterId === master.id);
  }

  async refreshTopology(): Promise<void> {
    await Promise.all(
      this.running().map(async (node) => {
        const me = parseClusterNodes(await node.command('CLUSTER', 'NODES')).find((l) => l.flags.includes('myself'));
        if (!me) throw new Error(`${node.url}: CLUSTER NODES has no "myself" line`);
        node.id = me.id;
        node.role = me.flags.includes('master') ? 'master' : 'replica';
        node.masterId = node.role === 'replica' ? me.masterId : undefined;
      }),
    );
  }

  async waitForHealthy(timeoutMs = HEALTHY_TIMEOUT_MS): Promise<void> {
    await waitForServer(
      this.running().map((n) => n.server),
      'the cluster to be healthy (cluster_state:ok, 16384 slots, one view of the masters, replicas in sync)',
      () => this.isHealthy(),
      timeoutMs,
    );
    await this.refreshTopology();
  }

  async killMasterAndWaitForPromotion(master: ClusterNode, timeoutMs = FAILOVER_TIMEOUT_MS): Promise<ClusterNode> {
    await this.refreshTopology();
    if (master.role !== 'master' || !master.isRunning()) throw new Error(`${master.url} is not a running master`);
    const replica = this.replicaOf(master);
    if (!replica) throw new Error(`master ${master.url} has no running replica to promote`);
    const deadline = Date.now() + timeoutMs;
    await master.kill('SIGKILL');
    await waitForServer(
      [replica.server],
      `replica ${replica.url} to be promoted after ${master.url} was killed`,
      async () => parseInfo(await replica.command('INFO', 'replication')).get('role') === 'master',
      Math.max(1, deadline - Date.now()),
    );
    await this.waitForHealthy(Math.max(1, deadline - Date.now()));
    return replica;
  }

  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((n) => n.server.stop()));
  }

  private running(): ClusterNode[] {
    return this.nodes.filter((n) => n.isRunning());
  }

  private async isHealthy(): Promise<boolean> {
    const views = await Promise.all(
      this.running().map(async (node) => {
        const info = parseInfo(await node.command('CLUSTER', 'INFO'));
        const ok =
          info.get('cluster_state') === 'ok' &&
          Number(info.get('cluster_slots_assigned')) === CLUSTER_SLOTS &&
          Number(info.get('cluster_slots_ok')) === CLUSTER_SLOTS &&
          Number(info.get('cluster_known_nodes')) === this.nodes.length;
        const lines = parseClusterNodes(await node.command('CLUSTER', 'NODES'));
        const me = lines.find((l) => l.flags.includes('myself'));
        if (me?.flags.includes('slave')) {
          const replication = parseInfo(await node.command('INFO', 'replication'));
          if (replication.get('master_link_status') !== 'up') return undefined;
        }
        const serving = lines
          .filter((l) => l.flags.includes('master') && !l.flags.some((f) => f.startsWith('fail')) && l.hasSlots)
          .map((l) => l.id)
          .sort()
          .join(' ');
        return ok ? serving : undefined;
      }),
    );
    const first = views[0];
    return first !== undefined && views.every((v) => v === first) && first.split(' ').length === this.masterCount;
  }
}
