import * as fs from 'node:fs';
import * as net from 'node:net';
import Redis, { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { liveChildCount } from '../harness/cleanup-registry';
import { respCommand } from '../harness/resp-client';
import {
  CLUSTER_SLOTS,
  keySlot,
  requireRedisServer,
  startCluster,
  startSentinel,
  startStandalone,
  type RedisClusterHarness,
  type SentinelHarness,
} from '../harness/redis-servers';

/** Resolves true when nothing accepts connections on the port any more. */
function portClosed(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    socket.once('connect', () => (socket.destroy(), resolve(false)));
    socket.once('error', () => resolve(true));
  });
}

// Fail fast, never reconnect: a test that hangs on a dead server is worse than a clear failure.
const clientOptions = { lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null } as const;

describe('redis harness', () => {
  it('finds redis-server and redis-cli', () => {
    expect(requireRedisServer()).toMatch(/Redis server v=\d+/);
  });

  describe('standalone', () => {
    it('starts, answers, restarts on the same port with an empty script cache, and stops', async () => {
      const server = await startStandalone();
      try {
        expect(server.url).toBe(`127.0.0.1:${server.port}`);
        const client = new Redis({ host: server.host, port: server.port, ...clientOptions });
        await client.connect();
        expect(await client.ping()).toBe('PONG');
        const sha = String(await client.script('LOAD', 'return 1'));
        await client.set('k', 'v');
        client.disconnect();

        const port = server.port;
        await server.restart();
        expect(server.port).toBe(port);
        expect(await server.command('SCRIPT', 'EXISTS', sha)).toEqual([0]);
        expect(await server.command('GET', 'k')).toBeNull();

        await server.kill('SIGKILL');
        expect(server.isRunning()).toBe(false);
        expect(await portClosed(port)).toBe(true);
        await server.restart();
        expect(await server.command('PING')).toBe('PONG');
      } finally {
        await server.stop();
      }
      expect(await portClosed(server.port)).toBe(true);
      expect(fs.existsSync(server.dir)).toBe(false);
    }, 30_000);

    it('enforces a password when given one', async () => {
      const server = await startStandalone({ password: 's3cret', extraArgs: ['--maxmemory', '16mb'] });
      try {
        await expect(respCommand(server.host, server.port, ['GET', 'k'])).rejects.toThrow(/NOAUTH/);
        expect(await server.command('GET', 'k')).toBeNull();
        const client = new Redis({ host: server.host, port: server.port, password: 's3cret', ...clientOptions });
        await client.connect();
        expect(await client.config('GET', 'maxmemory')).toEqual(['maxmemory', String(16 * 1024 * 1024)]);
        client.disconnect();
      } finally {
        await server.stop();
      }
    }, 30_000);
  });

  describe('cluster', () => {
    let cluster: RedisClusterHarness;
    beforeAll(async () => {
      cluster = await startCluster({ masters: 3, replicasPerMaster: 1 });
    }, 90_000);
    afterAll(async () => {
      await cluster?.stop();
    }, 30_000);

    it('has 3 masters and 3 replicas, one replica per master', () => {
      expect(cluster.nodes).toHaveLength(6);
      expect(cluster.masters()).toHaveLength(3);
      expect(cluster.replicas()).toHaveLength(3);
      for (const master of cluster.masters()) expect(cluster.replicaOf(master)).toBeDefined();
      expect(cluster.seeds.split(',')).toEqual(cluster.nodes.map((n) => n.url));
    });

    it('covers all 16384 slots exactly once, on every node', async () => {
      for (const node of cluster.nodes) {
        const slots = (await node.command('CLUSTER', 'SLOTS')) as [number, number, ...unknown[]][];
        const covered = new Uint8Array(CLUSTER_SLOTS);
        for (const [from, to] of slots) for (let s = from; s <= to; s++) covered[s] = (covered[s] ?? 0) + 1;
        expect(covered.every((c) => c === 1)).toBe(true);
        expect(slots.length).toBeGreaterThanOrEqual(3);
      }
    });

    it('computes the same slot as CLUSTER KEYSLOT', async () => {
      const keys = ['foo', '{user1000}.following', 'a{}b', '{}x', 'x{', 'x}{y}', 'é{ü}', '{%7B}:rl', '{a}{b}'];
      const node = cluster.nodes[0]!;
      for (const key of keys) expect(keySlot(key)).toBe(await node.command('CLUSTER', 'KEYSLOT', key));
    });

    it('serves ioredis Cluster clients and promotes a replica when its master is killed', async () => {
      const client = new Cluster([...cluster.startupNodes], { enableOfflineQueue: true });
      try {
        for (let i = 0; i < 50; i++) await client.set(`key:${i}`, String(i));
        const slot = keySlot('key:7');
        const owner = cluster.masters().find((m) => m.port === ownerPort(client, slot))!;
        expect(owner).toBeDefined();
        await client
          .nodes('master')
          .find((n) => n.options.port === owner.port)!
          .wait(1, 2000);

        const replica = cluster.replicaOf(owner)!;
        const started = Date.now();
        const promoted = await cluster.killMasterAndWaitForPromotion(owner);
        const elapsed = Date.now() - started;
        expect(promoted.url).toBe(replica.url);
        expect(promoted.role).toBe('master');
        expect(owner.isRunning()).toBe(false);
        expect(cluster.masters()).toHaveLength(3);
        expect(elapsed).toBeLessThan(45_000);
        expect(await promoted.command('GET', 'key:7')).toBe('7');
      } finally {
        client.disconnect();
      }
    }, 40_000);

    it('closes every port on stop', async () => {
      const ports = cluster.nodes.map((n) => n.port);
      await cluster.stop();
      for (const port of ports) expect(await portClosed(port)).toBe(true);
    }, 30_000);
  });

  describe('sentinel', () => {
    let sentinel: SentinelHarness;
    beforeAll(async () => {
      sentinel = await startSentinel({ masterName: 'mymaster' });
    }, 60_000);
    afterAll(async () => {
      await sentinel?.stop();
    }, 30_000);

    it('lets ioredis find the master through the sentinels', async () => {
      expect(sentinel.masterName).toBe('mymaster');
      expect(sentinel.sentinels).toMatch(/^127\.0\.0\.1:\d+$/);
      const client = new Redis({
        sentinels: [...sentinel.sentinelAddresses],
        name: sentinel.masterName,
        lazyConnect: true,
        maxRetriesPerRequest: 1,
      });
      try {
        await client.connect();
        await client.set('greeting', 'hello');
        expect(await client.get('greeting')).toBe('hello');
        expect(await client.config('GET', 'port')).toEqual(['port', String(sentinel.master().port)]);
      } finally {
        client.disconnect();
      }
    }, 20_000);

    it('fails over to the replica when the master is killed', async () => {
      const replica = sentinel.replica();
      const promoted = await sentinel.killMasterAndWaitForFailover();
      expect(promoted).toBe(replica);
      const client = new Redis({
        sentinels: [...sentinel.sentinelAddresses],
        name: sentinel.masterName,
        lazyConnect: true,
        maxRetriesPerRequest: 1,
      });
      try {
        await client.connect();
        await client.set('after', 'failover');
        expect(await promoted.command('GET', 'after')).toBe('failover');
      } finally {
        client.disconnect();
      }
    }, 40_000);

    it('closes every port on stop', async () => {
      const ports = [...sentinel.sentinelNodes, ...sentinel.dataNodes].map((s) => s.port);
      await sentinel.stop();
      for (const port of ports) expect(await portClosed(port)).toBe(true);
    }, 30_000);
  });

  it('leaves no child process behind', () => {
    expect(liveChildCount()).toBe(0);
  });
});

function ownerPort(client: Cluster, slot: number): number | undefined {
  // ioredis keeps the slot table as arrays of "host:port" (master first).
  const owners = (client as unknown as { slots: string[][] }).slots[slot];
  const url = owners?.[0];
  return url === undefined ? undefined : Number(url.slice(url.lastIndexOf(':') + 1));
}
