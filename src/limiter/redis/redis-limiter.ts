import calculateSlot from 'cluster-key-slot';
import { Cluster } from 'ioredis';
import type { Algorithm } from '../../domain/algorithm';
import { BackendUnavailableError, DeadlineExceededError } from '../../errors';
import { BreakerCall, CircuitBreaker } from './circuit-breaker';
import { counterKey } from '../counter-key';
import type { CheckOptions, LimitCheck, LimitResult, Limiter } from '../limiter';
import { algorithmScripts, type AlgorithmScript, type CallPass, type WrapScript } from './algorithm-scripts';
import { CallCoalescer, type CoalescerOptions } from './call-coalescer';
import { isClientReady, refreshAfterFailure, type RedisClient } from './redis-client';
import type { BreakerState, RedisCallObserver } from '../../metrics/redis-call-observer';

export interface RedisLimiterOptions {
  readonly client: RedisClient;
  /** REDIS_PERSECOND: SECOND-window counters go to this client instead. */
  readonly perSecondClient?: RedisClient;
  readonly keyPrefix: string;
  /** Makes the circuit breaker of each Redis node; tests pass their own thresholds. */
  readonly newBreaker?: () => CircuitBreaker;
  /** REDIS_PIPELINE_WINDOW / REDIS_PIPELINE_LIMIT for merging concurrent calls. */
  readonly coalescing?: CoalescerOptions;
  /** TRACING_ENABLED: each script call in a span. */
  readonly wrapScript?: WrapScript;
  /** Test hook: pins the script's clock (epoch ms) instead of Redis TIME. */
  readonly pinnedNow?: () => number;
  /** Operator metrics: script latency per script and node, errors by kind. */
  readonly observer?: RedisCallObserver;
}

/** The checks of one call that go to one Redis node and slot with one algorithm: one atomic script call. */
interface SlotGroup {
  readonly client: RedisClient;
  readonly algorithm: AlgorithmScript;
  /** Client side, slot and algorithm: calls with the same one may be merged. */
  readonly batchKey: string;
  readonly breaker: CircuitBreaker;
  /** The breaker's name: side and node (`m|127.0.0.1:7000`). */
  readonly node: string;
  readonly keys: string[];
  readonly indexes: number[];
}

/**
 * Counts in Redis: every check is one key; the checks of one call that share a slot (all of
 * them, outside a cluster) and an algorithm go to Redis as one atomic call of that algorithm's
 * script (algorithm-scripts.ts), and the groups are sent in parallel. Each Redis node has its
 * own circuit breaker, so a lost cluster master fails fast for its own slots while the other
 * masters keep answering.
 */
export class RedisLimiter implements Limiter {
  private readonly scripts: Readonly<Record<Algorithm, AlgorithmScript>>;
  private readonly breakers = new Map<string, CircuitBreaker>();
  private readonly coalescer: CallCoalescer;
  private readonly newBreaker: () => CircuitBreaker;

  constructor(private readonly options: RedisLimiterOptions) {
    this.scripts = algorithmScripts(options.wrapScript);
    this.newBreaker = options.newBreaker ?? (() => new CircuitBreaker());
    this.coalescer = new CallCoalescer(options.coalescing);
    // A (re)connected client is worth trying at once, not after the breaker's open time.
    for (const client of this.clients()) client.on('ready', () => this.breakers.clear());
  }

  async check(checks: readonly LimitCheck[], options: CheckOptions): Promise<LimitResult[]> {
    const groups = this.group(checks);
    try {
      admitOrThrow(groups);
    } catch (err) {
      this.options.observer?.refused('breaker_open');
      throw err;
    }
    try {
      if (options.holdBack === true) return await this.runGroups(checks, groups, 'look', options.deadline);
      return options.stopIncrementWhenOverLimit && groups.length > 1
        ? await this.stopAcrossGroups(checks, groups, options.deadline)
        : await this.runGroups(checks, groups, options.stopIncrementWhenOverLimit ? 'stop' : 'count', options.deadline);
    } catch (err) {
      for (const group of groups) refreshAfterFailure(group.client);
      throw err instanceof DeadlineExceededError || err instanceof BackendUnavailableError
        ? err
        : new BackendUnavailableError(`redis: ${(err as Error).message}`, { cause: err });
    }
  }

  /**
   * Unhealthy only while Redis is unreachable as a whole: a client is not connected, or every
   * node of a client has an open circuit (a Redis that hangs). A partial cluster outage is not.
   */
  isHealthy(): boolean {
    return this.clients().every((client) => isClientReady(client) && !this.allCircuitsOpen(client));
  }

  async close(): Promise<void> {
    await Promise.all(this.clients().map((c) => c.quit().catch(() => c.disconnect())));
  }

  private clients(): RedisClient[] {
    const { client, perSecondClient } = this.options;
    return perSecondClient === undefined ? [client] : [client, perSecondClient];
  }

  private allCircuitsOpen(client: RedisClient): boolean {
    const prefix = client === this.options.client ? 'm|' : 's|';
    const nodes = client instanceof Cluster ? client.nodes('master').length : 1;
    let open = 0;
    for (const [name, breaker] of this.breakers) if (name.startsWith(prefix) && breaker.isOpen) open++;
    return open > 0 && open >= nodes;
  }

  /** Every node's circuit breaker that has seen a call, for the operator metrics. */
  breakerStates(): BreakerState[] {
    return [...this.breakers].map(([node, breaker]) => ({ node, open: breaker.isOpen }));
  }

  private breakerFor(name: string): CircuitBreaker {
    let breaker = this.breakers.get(name);
    if (breaker === undefined) this.breakers.set(name, (breaker = this.newBreaker()));
    return breaker;
  }

  private group(checks: readonly LimitCheck[]): SlotGroup[] {
    const { client, perSecondClient, keyPrefix } = this.options;
    const groups = new Map<string, SlotGroup>();
    for (let i = 0; i < checks.length; i++) {
      const check = checks[i] as LimitCheck;
      const key = counterKey(keyPrefix, check.counter, check.spec);
      const target = perSecondClient !== undefined && check.spec.windowSeconds === 1 ? perSecondClient : client;
      const side = target === client ? 'm|' : 's|';
      // Outside a cluster every key lives on one server: one script call for all of them.
      const slot = target instanceof Cluster ? calculateSlot(key) : -1;
      const groupKey = side + slot + '|' + check.spec.algorithm;
      let group = groups.get(groupKey);
      if (group === undefined) {
        const node = target instanceof Cluster ? (target.slots[slot]?.[0] ?? `slot ${slot}`) : 'server';
        const algorithm = this.scripts[check.spec.algorithm];
        group = {
          client: target,
          algorithm,
          batchKey: groupKey,
          breaker: this.breakerFor(side + node),
          node: side + node,
          keys: [],
          indexes: [],
        };
        groups.set(groupKey, group);
      }
      group.keys.push(key);
      group.indexes.push(i);
    }
    return [...groups.values()];
  }

  /**
   * STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT over several script calls, with the rule each script
   * applies within one call (lua/lib/run_call.lua): look at every counter first; when none is
   * denied, charge them all; else charge only the denied counters that count every hit
   * (fixed_window, as the reference increments each key that would go over) and hold back
   * the others.
   */
  private async stopAcrossGroups(checks: readonly LimitCheck[], groups: SlotGroup[], deadline: number): Promise<LimitResult[]> {
    const looked = await this.runGroups(checks, groups, 'look', deadline);
    if (looked.every((r) => r.allowed)) return this.runGroups(checks, groups, 'stop', deadline);
    const overGoing: SlotGroup[] = [];
    for (const group of groups) {
      if (!group.algorithm.countsEveryHit) continue;
      const keys: string[] = [];
      const indexes: number[] = [];
      group.indexes.forEach((i, j) => {
        if (!(looked[i] as LimitResult).allowed) {
          keys.push(group.keys[j] as string);
          indexes.push(i);
        }
      });
      if (indexes.length > 0) overGoing.push({ ...group, keys, indexes });
    }
    if (overGoing.length === 0) return looked;
    const charged = await this.runGroups(checks, overGoing, 'count', deadline);
    for (const group of overGoing) for (const i of group.indexes) looked[i] = charged[i] as LimitResult;
    return looked;
  }

  /**
   * Each Redis call tells its node's breaker its outcome once, when it settles (see BreakerCall);
   * a call still unanswered at the deadline has failed, and its late end is not counted again.
   */
  private async runGroups(checks: readonly LimitCheck[], groups: SlotGroup[], pass: CallPass, deadline: number): Promise<LimitResult[]> {
    const results = new Array<LimitResult>(checks.length);
    const calls: BreakerCall[] = [];
    const pending = new Set(groups);
    const runs = groups.map((g) => this.observedGroup(checks, g, pass, results, calls).finally(() => pending.delete(g)));
    try {
      await withDeadline(Promise.all(runs), deadline);
    } catch (err) {
      if (err instanceof DeadlineExceededError) {
        for (const call of calls) call.failed();
        if (pending.size > 0) this.options.observer?.refused('timeout');
      }
      throw err;
    }
    return results;
  }

  /** runGroup, timed for the observer (operator metrics): one script call per group and node. */
  private async observedGroup(
    checks: readonly LimitCheck[],
    group: SlotGroup,
    pass: CallPass,
    out: LimitResult[],
    calls: BreakerCall[],
  ): Promise<void> {
    const observer = this.options.observer;
    if (observer === undefined) return this.runGroup(checks, group, pass, out, calls);
    const started = performance.now();
    const script = (checks[group.indexes[0] as number] as LimitCheck).spec.algorithm;
    try {
      await this.runGroup(checks, group, pass, out, calls);
      observer.scriptCall(script, group.node, (performance.now() - started) / 1000);
    } catch (err) {
      observer.scriptCall(script, group.node, (performance.now() - started) / 1000, err);
      throw err;
    }
  }

  private async runGroup(
    checks: readonly LimitCheck[],
    group: SlotGroup,
    pass: CallPass,
    out: LimitResult[],
    calls: BreakerCall[],
  ): Promise<void> {
    const algorithm = group.algorithm;
    const args: (number | string)[] = [];
    for (const i of group.indexes) algorithm.pushArgs(args, checks[i] as LimitCheck);
    let reply: number[];
    if (pass === 'count' && algorithm.coalescible && this.options.pinnedNow === undefined) {
      const merged = this.coalescer.run({
        batchKey: group.batchKey,
        client: group.client,
        script: algorithm.script,
        mode: algorithm.mode(pass),
        replyWidth: algorithm.replyWidth,
        breaker: group.breaker,
        keys: group.keys,
        args,
      });
      calls.push(merged.call);
      reply = await merged.reply;
    } else {
      if (this.options.pinnedNow) args.push(this.options.pinnedNow());
      const call = new BreakerCall(group.breaker);
      calls.push(call);
      reply = await call.track(algorithm.script.run(group.client, group.keys, [algorithm.mode(pass), ...args]));
    }
    for (let j = 0; j < group.indexes.length; j++) out[group.indexes[j] as number] = algorithm.decode(reply, j);
  }
}

/**
 * One breaker decision per distinct node of the request: a request with two script calls to one
 * node asks that node's breaker once, so that when it is half open the request is its probe
 * (asking twice, the second ask was refused and the probe cancelled, for ever). When a node
 * refuses, the probes already granted to others are handed back.
 */
function admitOrThrow(groups: readonly SlotGroup[]): void {
  const admitted: CircuitBreaker[] = [];
  for (const { breaker } of groups) {
    if (admitted.includes(breaker)) continue;
    if (breaker.allow()) {
      admitted.push(breaker);
      continue;
    }
    for (const b of admitted) b.cancelProbe();
    throw new BackendUnavailableError('redis is unavailable (circuit open)');
  }
}

/** Rejects with DeadlineExceededError when `work` has not settled by `deadline` (epoch ms). */
function withDeadline<T>(work: Promise<T>, deadline: number): Promise<T> {
  const budget = deadline - Date.now();
  if (budget <= 0) {
    work.catch(() => undefined);
    return Promise.reject(new DeadlineExceededError('no time left for redis'));
  }
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new DeadlineExceededError(`redis did not answer within ${budget} ms`)), budget);
    work.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (e: Error) => {
        clearTimeout(timer);
        reject(e);
      },
    );
  });
}
