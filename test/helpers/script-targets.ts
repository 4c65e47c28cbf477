// A Redis deployment (standalone or the 3-master cluster) with Lua scripts loaded on every
// master, for suites that call the scripts directly with EVALSHA.
import Redis, { Cluster } from 'ioredis';
import { startCluster, startStandalone } from '../harness/redis-servers';

export type ScriptClient = Redis | Cluster;

export interface ScriptTarget {
  client: ScriptClient;
  /** Extra clients for concurrency tests (separate connections). */
  clients: ScriptClient[];
  /** SHA1 of each loaded script, by name. */
  sha: Record<string, string>;
  /** Every key on the deployment. */
  allKeys(): Promise<string[]>;
  stop(): Promise<void>;
}

async function loadAll(direct: Redis, sources: Readonly<Record<string, string>>): Promise<Record<string, string>> {
  const sha: Record<string, string> = {};
  for (const [name, source] of Object.entries(sources)) sha[name] = String(await direct.script('LOAD', source));
  return sha;
}

/** A standalone redis-server with `sources` (name → script text) loaded. */
export async function standaloneTarget(sources: Readonly<Record<string, string>>): Promise<ScriptTarget> {
  const server = await startStandalone();
  const clients = Array.from({ length: 4 }, () => new Redis({ host: server.host, port: server.port, maxRetriesPerRequest: 1 }));
  const client = clients[0]!;
  const sha = await loadAll(client, sources);
  return {
    client,
    clients,
    sha,
    allKeys: () => client.keys('*'),
    stop: async () => {
      clients.forEach((c) => c.disconnect());
      await server.stop();
    },
  };
}

/** A 3-master, 3-replica cluster with `sources` loaded on every master. */
export async function clusterTarget(sources: Readonly<Record<string, string>>): Promise<ScriptTarget> {
  const cluster = await startCluster({ masters: 3, replicasPerMaster: 1 });
  const clients = Array.from({ length: 4 }, () => new Cluster([...cluster.startupNodes], { redisOptions: { maxRetriesPerRequest: 1 } }));
  const client = clients[0]!;
  await Promise.all(clients.map((c) => c.ping()));
  // SCRIPT LOAD reaches one node only; the production loader falls back to EVAL on NOSCRIPT,
  // here every master gets the scripts up front.
  let sha: Record<string, string> = {};
  for (const m of cluster.masters()) {
    const direct = new Redis({ host: m.host, port: m.port, maxRetriesPerRequest: 1 });
    try {
      sha = await loadAll(direct, sources);
    } finally {
      direct.disconnect();
    }
  }
  return {
    client,
    clients,
    sha,
    allKeys: async () => (await Promise.all(client.nodes('master').map((n) => n.keys('*')))).flat(),
    stop: async () => {
      clients.forEach((c) => c.disconnect());
      await cluster.stop();
    },
  };
}
