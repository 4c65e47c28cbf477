// Shared pieces of the redis-backend-*.test.ts suites: real gRPC calls with their client-side
// latency, key inspection on real Redis nodes (SCAN under a CACHE_KEY_PREFIX), and a guard
// against window boundaries. The built server as a child process is test/helpers/server-process.ts.
import { randomBytes } from 'node:crypto';
import { status as GrpcStatus } from '@grpc/grpc-js';
import type { RespValue } from '../harness/resp-client';
import type { RlsTestClient, TestRequest } from '../helpers/rls-client';

/** Anything the harness can send a raw command to (RedisProcess, ClusterNode). */
export interface RedisNode {
  readonly url: string;
  command(...args: (string | number)[]): Promise<RespValue>;
}

/** A fresh CACHE_KEY_PREFIX, so a test can SCAN exactly its own keys. */
export function uniquePrefix(tag: string): string {
  return `t_${tag}_${randomBytes(4).toString('hex')}_`;
}

/** Every key under `prefix` on one node (SCAN, bounded). */
export async function scanKeys(node: RedisNode, prefix: string): Promise<string[]> {
  const keys: string[] = [];
  let cursor = '0';
  for (let round = 0; round < 10_000; round++) {
    const reply = (await node.command('SCAN', cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000)) as [string, string[]];
    cursor = String(reply[0]);
    keys.push(...reply[1].map(String));
    if (cursor === '0') return keys;
  }
  throw new Error(`SCAN on ${node.url} did not finish`);
}

/** The EVALSHA and EVAL calls `nodes` have run (INFO commandstats): script calls, merged or not. */
export async function scriptCalls(nodes: readonly RedisNode[]): Promise<number> {
  let total = 0;
  for (const node of nodes) {
    const info = String(await node.command('INFO', 'commandstats'));
    for (const m of info.matchAll(/cmdstat_(?:evalsha|eval):calls=(\d+)/g)) total += Number(m[1]);
  }
  return total;
}

/** The PTTL of every key under `prefix` on `node`. */
export async function pttls(node: RedisNode, prefix: string): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const key of await scanKeys(node, prefix)) out.set(key, Number(await node.command('PTTL', key)));
  return out;
}

/** What one call came back with, as the client saw it. */
export interface CallOutcome {
  /** 'OK' / 'OVER_LIMIT' for an answer, else the gRPC status name (e.g. 'UNAVAILABLE'). */
  readonly code: string;
  readonly ms: number;
  /** performance.now() when the call started and when its answer was seen. */
  readonly startedPerf: number;
  readonly endedPerf: number;
  readonly remaining?: number;
  readonly resetSeconds?: number;
  readonly details?: string;
}

/** One ShouldRateLimit call that never throws; measures client-observed latency. */
export async function timedCall(client: RlsTestClient, request: TestRequest, timeoutMs = 5000): Promise<CallOutcome> {
  const started = performance.now();
  try {
    const res = await client.shouldRateLimit(request, timeoutMs);
    const status = res.statuses[0];
    const ended = performance.now();
    return {
      code: res.overall_code,
      ms: ended - started,
      startedPerf: started,
      endedPerf: ended,
      ...(status ? { remaining: status.limit_remaining, resetSeconds: Number(status.duration_until_reset?.seconds ?? 0) } : {}),
    };
  } catch (err) {
    const e = err as { code?: number; details?: string };
    const ended = performance.now();
    return {
      code: GrpcStatus[e.code ?? GrpcStatus.UNKNOWN] ?? String(e.code),
      ms: ended - started,
      startedPerf: started,
      endedPerf: ended,
      details: e.details ?? String(err),
    };
  }
}

/** A tally of outcome codes, e.g. `{ OK: 50, OVER_LIMIT: 150 }`. */
export function tally(outcomes: readonly CallOutcome[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const o of outcomes) counts[o.code] = (counts[o.code] ?? 0) + 1;
  return counts;
}

export { awayFromWindowEdge, msToWindowEnd } from '../helpers/windows';

/** Reads one labelled sample of a Prometheus text exposition (0 when absent). */
export function metricValue(text: string, name: string, labels: Record<string, string>): number {
  for (const line of text.split('\n')) {
    if (!line.startsWith(name + '{')) continue;
    const ok = Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`));
    if (ok) return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return 0;
}

/** A rule file with one key-only descriptor `key` limited to `limit` per `unit`. */
export function oneRule(domain: string, key: string, limit: number, unit = 'hour'): string {
  return `domain: ${domain}\ndescriptors:\n  - key: ${key}\n    rate_limit:\n      unit: ${unit}\n      requests_per_unit: ${limit}\n`;
}

/**
 * Records the moments when this (test) process itself could not run: its event loop checked
 * every 5 ms and found a gap. On this small, shared machine the client sometimes stalls for
 * tens of ms; a call that was in flight across such a stall can miss its deadline at the
 * client although the server answered in time (the client's deadline timer runs first when
 * the loop resumes). Such calls are told apart so that the assertions measure the server.
 */
export class StallMonitor {
  private readonly stalls: { from: number; to: number }[] = [];
  private last = performance.now();
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly thresholdMs = 15) {
    this.timer = setInterval(() => {
      const now = performance.now();
      if (now - this.last > this.thresholdMs) this.stalls.push({ from: this.last, to: now });
      this.last = now;
    }, 5);
  }

  /** True when the window [from, to] (performance.now() times) overlaps a stall of this process. */
  overlaps(from: number, to: number): boolean {
    return this.stalls.some((s) => s.from < to && s.to > from);
  }

  get worstMs(): number {
    return Math.max(0, ...this.stalls.map((s) => s.to - s.from));
  }

  get count(): number {
    return this.stalls.length;
  }

  stop(): void {
    clearInterval(this.timer);
  }
}

export { CountingBreaker } from '../helpers/counting-breaker';
