import type Redis from 'ioredis';
import { Cluster } from 'ioredis';
import {
  counterKeyPattern,
  counterKeyShape,
  referenceKeyShape,
  repairReferenceTtlSeconds,
  repairTtlSeconds,
  type ReferenceDomains,
} from './key-shape';

/** How hard a scan may lean on Redis. */
export interface ScanPace {
  /** SCAN's COUNT hint: keys examined per call (bounded by the caller's validation). */
  readonly count: number;
  /** Pause between two SCAN calls on one node, so the scan never takes more than its share. */
  readonly pauseMs: number;
  /** Hard bound on SCAN calls per node, whatever the cursor says. */
  readonly maxCalls: number;
}

export interface KeyFinding {
  readonly key: string;
  readonly node: string;
  readonly noTtl: boolean;
  readonly unknownShape: boolean;
  /** PTTL in ms (-1: none). */
  readonly pttl: number;
  readonly redisType: string;
  /** A key of the reference's layout (REDIS_KEY_LAYOUT=reference), not of floodgate's own. */
  readonly reference?: true;
  /** Set when a TTL was given (fix mode), in seconds. */
  readonly fixedTtlSeconds?: number;
}

export interface ScanReport {
  readonly nodes: number;
  readonly scanned: number;
  readonly withoutTtl: number;
  readonly unknownShape: number;
  readonly fixed: number;
  readonly findings: readonly KeyFinding[];
}

export interface ScanOptions extends ScanPace {
  readonly prefix: string;
  /**
   * Give a key without a TTL one (`EXPIRE ... NX`): a counter its two windows, a policy key
   * `ttlSeconds`. A key of unknown shape only with `unknownShapes` (then `ttlSeconds`): with the
   * default empty prefix, `rl:*` may hold other applications' keys. A reference key only with
   * `referenceKeys` (`--fix-reference`): its name is the only sign that it is one.
   */
  readonly fix?: { readonly ttlSeconds: number; readonly unknownShapes: boolean; readonly referenceKeys?: boolean };
  /**
   * REDIS_KEY_LAYOUT=reference: also walk the reference's keys (`<prefix><domain>_..._<window
   * start>`, issue 30), every key under the prefix then; a key is one only when its domain is
   * one of these (the loaded rules' domains, key-shape.ts referenceKeyShape). Others outside
   * `<prefix>rl:` are another application's: skipped, never counted nor reported. Absent or
   * empty: no key is taken for the reference's.
   */
  readonly referenceDomains?: ReferenceDomains;
  /** Stop early (service shutdown). */
  readonly signal?: AbortSignal;
  /** Findings kept in the report; counts go on past it. */
  readonly maxFindings?: number;
}

/**
 * The nodes to scan: a standalone server itself, or every master of a cluster, or with
 * `replicas` every replica of it (none while the client knows of none: primaries are never
 * scanned when replicas were asked for).
 */
export function scanTargets(client: Redis | Cluster, replicas: boolean): Redis[] {
  if (!(client instanceof Cluster)) return [client];
  return replicas ? shardReplicas(client).replicas : client.nodes('master');
}

/**
 * One replica per shard, so that every key is counted once (a shard with two replicas is not
 * scanned twice) and no primary is touched; `missing` counts the shards whose replica the
 * client does not know (yet).
 */
export function shardReplicas(cluster: Cluster): { replicas: Redis[]; missing: number } {
  const byName = new Map(cluster.nodes('slave').map((n) => [nodeName(n), n]));
  const shards = new Set<string>();
  const replicas: Redis[] = [];
  let missing = 0;
  for (const owners of cluster.slots) {
    const [primary, ...others] = owners ?? [];
    if (primary === undefined || shards.has(primary)) continue;
    shards.add(primary);
    const replica = others.map((name) => byName.get(name)).find((n) => n !== undefined);
    if (replica === undefined) missing++;
    else replicas.push(replica);
  }
  return { replicas, missing };
}

function nodeName(node: Redis): string {
  const o = node.options;
  return o.path ?? `${o.host ?? '127.0.0.1'}:${o.port ?? 6379}`;
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (ms <= 0 || signal?.aborted) return resolve();
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
  });
}

/** The report as it grows while a scan walks the nodes. */
interface Tally {
  scanned: number;
  withoutTtl: number;
  unknownShape: number;
  fixed: number;
  readonly findings: KeyFinding[];
}

/** One node being scanned, and where fixes are written. */
interface NodeScan {
  readonly node: Redis;
  readonly writer: Redis | Cluster;
  readonly options: ScanOptions;
  readonly tally: Tally;
}

/**
 * Walks every key floodgate may have written under the prefix with SCAN (COUNT-bounded and
 * paused between calls), and reports those without a TTL and those of an unknown shape. With
 * `fix`, writes go to `writer` (the client that routes to masters), never to a replica.
 */
export async function scanCounterKeys(nodes: readonly Redis[], writer: Redis | Cluster, options: ScanOptions): Promise<ScanReport> {
  const tally: Tally = { scanned: 0, withoutTtl: 0, unknownShape: 0, fixed: 0, findings: [] };
  for (const node of nodes) await scanNode({ node, writer, options, tally });
  return { nodes: nodes.length, ...tally };
}

async function scanNode(scan: NodeScan): Promise<void> {
  const { node, options } = scan;
  const domains = options.referenceDomains;
  const walkAll = domains !== undefined && domains.size > 0;
  const match = walkAll ? escapedPrefix(options.prefix) + '*' : counterKeyPattern(options.prefix);
  let cursor = '0';
  for (let call = 0; call < options.maxCalls; call++) {
    if (options.signal?.aborted) break;
    const [next, keys] = await node.scan(cursor, 'MATCH', match, 'COUNT', options.count);
    cursor = next;
    const judged = walkAll ? keys.filter((k) => ownOrReferenceName(options.prefix, k, domains)) : keys;
    if (judged.length > 0) await examineKeys(scan, judged);
    if (cursor === '0') break;
    await sleep(options.pauseMs, options.signal);
  }
}

/** PTTL and TYPE of each key in one pipeline, then each key judged (and repaired with `fix`). */
async function examineKeys(scan: NodeScan, keys: readonly string[]): Promise<void> {
  const pipeline = scan.node.pipeline();
  for (const key of keys) pipeline.pttl(key).type(key);
  const replies = (await pipeline.exec()) ?? [];
  for (let i = 0; i < keys.length; i++) {
    const pttlReply = replies[2 * i]?.[1];
    const typeReply = replies[2 * i + 1]?.[1];
    const pttl = typeof pttlReply === 'number' ? pttlReply : -2;
    const redisType = typeof typeReply === 'string' ? typeReply : 'none';
    if (pttl === -2 || redisType === 'none') continue; // expired meanwhile
    await examineKey(scan, keys[i] as string, pttl, redisType);
  }
}

/** With referenceDomains: a name under `<prefix>rl:` (judged as before) or of the reference's shape (the type is checked after). */
function ownOrReferenceName(prefix: string, key: string, domains: ReferenceDomains): boolean {
  return key.startsWith(prefix + 'rl:') || referenceKeyShape(prefix, key, 'string', domains, Date.now()) !== undefined;
}

function escapedPrefix(prefix: string): string {
  return prefix.replace(/[*?[\]\\]/g, '\\$&');
}

/** The TTL `--fix` gives `key` (seconds), and whether it is a reference key; undefined ttl: not ours to judge. */
function judgeShape(options: ScanOptions, key: string, redisType: string): { known: boolean; ttl: number | undefined; reference: boolean } {
  const shape = counterKeyShape(options.prefix, key, redisType);
  if (shape !== undefined) return { known: true, ttl: repairTtlSeconds(shape), reference: false };
  const domains = options.referenceDomains;
  const reference = domains !== undefined ? referenceKeyShape(options.prefix, key, redisType, domains, Date.now()) : undefined;
  if (reference !== undefined) return { known: true, ttl: repairReferenceTtlSeconds(reference, Date.now()), reference: true };
  return { known: false, ttl: undefined, reference: false };
}

/** With `fix`, gives `key` (without a TTL) one: `ttl`, else the fix's own; the seconds given, or undefined. */
async function repair(
  scan: NodeScan,
  key: string,
  judged: { ttl: number | undefined; known: boolean; reference: boolean },
): Promise<number | undefined> {
  const fix = scan.options.fix;
  const { ttl, known, reference } = judged;
  if (fix === undefined || !(known || fix.unknownShapes) || (reference && fix.referenceKeys !== true)) return undefined;
  const seconds = ttl ?? fix.ttlSeconds;
  // NX: a key the service re-created with its own TTL meanwhile keeps that one.
  const set = await scan.writer.call('EXPIRE', key, String(seconds), 'NX');
  if (set !== 1) return undefined;
  scan.tally.fixed++;
  return seconds;
}

async function examineKey(scan: NodeScan, key: string, pttl: number, redisType: string): Promise<void> {
  const { options, tally } = scan;
  const judged = judgeShape(options, key, redisType);
  const { known, reference } = judged;
  // A key outside `<prefix>rl:` is ours only when it is the reference's (its type too).
  if (!known && !key.startsWith(options.prefix + 'rl:')) return;
  tally.scanned++;
  if (known && pttl >= 0) return;
  if (pttl < 0) tally.withoutTtl++;
  if (!known) tally.unknownShape++;
  const fixedTtlSeconds = pttl < 0 ? await repair(scan, key, judged) : undefined;
  if (tally.findings.length < (options.maxFindings ?? 1000)) {
    tally.findings.push({
      key,
      node: nodeName(scan.node),
      noTtl: pttl < 0,
      unknownShape: !known,
      ...(reference ? { reference: true as const } : {}),
      pttl,
      redisType,
      ...(fixedTtlSeconds !== undefined ? { fixedTtlSeconds } : {}),
    });
  }
}
