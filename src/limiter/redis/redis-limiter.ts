import { redisFailure } from './redis-failure';
import calculateSlot from 'cluster-key-slot';
import { Cluster } from 'ioredis';
import { ALGORITHMS, type Algorithm } from '../../domain/algorithm';
import { BackendUnavailableError, DeadlineExceededError } from '../../base/errors';
import { CircuitBreaker } from './circuit-breaker';
import { checkKey } from '../counter-key';
import { referenceWindowKey, type KeyLayout } from '../reference-key';
import type { CheckOptions, LimitCheck, LimitResult, Limiter } from '../limiter';
import {
  algorithmScripts,
  expirationJitter,
  fixedWindowListScript,
  limitListScript,
  referenceWindowScript,
  stopRequestScript,
  STOP_REQUEST_MODE,
  STOP_REQUEST_NAMED_MODE,
  REPLY_WIDTH,
  type AlgorithmScript,
  type StopRequestScript,
  type CallMode,
  type CallPass,
  type WrapScript,
} from './algorithm-scripts';
import { CallCoalescer, type CoalescerOptions, type ScriptCall } from './call-coalescer';
import { StopOrdering } from './stop-ordering';
import { FixedWindowStopBatches, type FixedWindowStopDecision, type FixedWindowStopRequest } from './fixed-window-stop';
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
  /**
   * REDIS_KEY_LAYOUT: with `reference`, every check whose limit the reference can express
   * (LimitSpec.shareable) counts in the reference's own key (lua/reference_window.lua); default
   * `floodgate`.
   */
  readonly keyLayout?: KeyLayout;
  /** EXPIRATION_JITTER_MAX_SECONDS: added (drawn in [0, max)) to a reference-layout key's expiry, as the reference adds it. */
  readonly expirationJitterMaxSeconds?: number;
}

/** The checks of one call that go to one Redis node and slot with one algorithm: one atomic script call. */
interface SlotGroup {
  readonly client: RedisClient;
  readonly algorithm: AlgorithmScript;
  /** The script's name: an algorithm, or a `rate_limits` list's (`fixed_window_list`, `limit_list`). */
  readonly algorithmName: ScriptName;
  /** Client side, slot and algorithm (a number: cheaper to look up than a string): calls with the same one may be merged. */
  readonly batchKey: number;
  /**
   * In a Redis Cluster, for a script that takes named counters: client side, node and
   * algorithm. Count-mode calls with the same one are merged across the node's slots.
   */
  readonly nodeBatchKey: number | undefined;
  readonly breaker: CircuitBreaker;
  /** The breaker's name: side and node (`m|127.0.0.1:7000`). */
  readonly node: string;
  /** Client side (0 main, 1 REDIS_PERSECOND), slot (-1 outside a cluster) and, in a cluster, the node the slot map names. */
  readonly side: 0 | 1;
  readonly slot: number;
  readonly served: string | undefined;
  readonly keys: string[];
  readonly indexes: number[];
}

/** Index of each algorithm's script in a batch key (SCRIPTS_PER_SLOT bounds them: see group()). */
const ALGORITHM_INDEX = Object.fromEntries(ALGORITHMS.map((a, i) => [a, i])) as Readonly<Record<Algorithm, number>>;
type ScriptName = Algorithm | 'fixed_window_list' | 'limit_list' | 'reference_window';

/** A script as a group names it: the script, its name and its index in a batch key. */
interface GroupScript {
  readonly script: AlgorithmScript;
  readonly name: ScriptName;
  readonly index: number;
}

/**
 * Scripts a batch key tells apart per slot and side: the algorithms', the two list scripts',
 * lua/stop_request.lua's and lua/reference_window.lua's (9, within 16).
 */
const SCRIPTS_PER_SLOT = 16;

/** The list scripts' indexes in a batch key, after the algorithms'. */
const LIST_INDEX = ALGORITHMS.length;
const FIXED_WINDOW_LIST_INDEX = ALGORITHMS.length + 1;
/** lua/stop_request.lua's index in a batch key. */
const STOP_REQUEST_INDEX = ALGORITHMS.length + 2;
/** lua/reference_window.lua's index in a batch key (REDIS_KEY_LAYOUT=reference). */
const REFERENCE_WINDOW_INDEX = ALGORITHMS.length + 3;
/**
 * Added to a slot's batch key for the calls of a pass that merge apart from the counts: above
 * every slot's ((16384 + 1) * 2 + 1) * 16 + 15.
 */
const PASS_BATCH_KEYS: Readonly<Record<CallPass, number>> = { count: 0, look: 1 << 20, stop: 2 << 20 };
const SIDES = ['m|', 's|'] as const;
/**
 * After a node's merged call came back with a counter it does not serve (a slot moved, or a
 * server that refuses a script keys of several slots), calls go per slot for this long: a
 * resharding settles, and a server that refuses costs one wasted call a minute.
 */
export const NODE_MERGE_PAUSE_MS = 60_000;

/**
 * Counts in Redis: every check is one key; the checks of one call that share a slot (all of
 * them, outside a cluster) and an algorithm go to Redis as one atomic call of that algorithm's
 * script (algorithm-scripts.ts), and the groups are sent in parallel. Each Redis node has its
 * own circuit breaker, so a lost cluster master fails fast for its own slots while the other
 * masters keep answering. Every call goes out through the CallCoalescer, which merges
 * concurrent count-mode calls and watches deadlines, breakers and timing once per Redis call.
 */
export class RedisLimiter implements Limiter {
  private readonly scripts: Readonly<Record<Algorithm, AlgorithmScript>>;
  /** Each algorithm's script as a group names it, made once. */
  private readonly groupScripts: Readonly<Record<Algorithm, GroupScript>>;
  private readonly listScript: AlgorithmScript;
  private readonly fixedWindowListScript: AlgorithmScript;
  private readonly stopRequestScript: StopRequestScript;
  /** REDIS_KEY_LAYOUT=reference: the script of the checks the reference can express; undefined in floodgate's layout. */
  private readonly referenceScript: GroupScript | undefined;
  /** The jitter of a reference-layout key's expiry (EXPIRATION_JITTER_MAX_SECONDS). */
  private readonly jitter: () => number;
  /** Per side (main, per-second): node name → its breaker. */
  private readonly breakers: readonly [Map<string, CircuitBreaker>, Map<string, CircuitBreaker>] = [new Map(), new Map()];
  private readonly coalescer: CallCoalescer;
  private readonly newBreaker: () => CircuitBreaker;
  /** A small number per cluster node name, for node batch keys. */
  private readonly nodeNumbers = new Map<string, number>();
  /** Epoch ms until which calls are merged per slot, not per node (NODE_MERGE_PAUSE_MS). */
  private nodeMergePausedUntil = 0;
  /**
   * STOP mode's order per counter in this process, when a request's counters can live on several
   * servers (a cluster, REDIS_PERSECOND); undefined on one Redis server, where every request is
   * one atomic call.
   */
  readonly stopOrdering: StopOrdering | undefined;
  /** STOP-mode requests of fixed windows over several servers, decided in batches (with stopOrdering). */
  private readonly fixedWindowStops: FixedWindowStopBatches | undefined;

  constructor(private readonly options: RedisLimiterOptions) {
    this.scripts = algorithmScripts(options.wrapScript);
    this.groupScripts = Object.fromEntries(
      ALGORITHMS.map((a) => [a, { script: this.scripts[a], name: a, index: ALGORITHM_INDEX[a] }]),
    ) as Record<Algorithm, GroupScript>;
    this.listScript = limitListScript(options.wrapScript, this.scripts);
    this.fixedWindowListScript = fixedWindowListScript(options.wrapScript);
    this.stopRequestScript = stopRequestScript(options.wrapScript);
    this.jitter = expirationJitter(options.expirationJitterMaxSeconds ?? 0);
    this.referenceScript =
      options.keyLayout === 'reference'
        ? { script: referenceWindowScript(options.wrapScript, this.jitter), name: 'reference_window', index: REFERENCE_WINDOW_INDEX }
        : undefined;
    this.newBreaker = options.newBreaker ?? (() => new CircuitBreaker());
    this.coalescer = new CallCoalescer({ ...options.coalescing, ...(options.observer ? { observer: options.observer } : {}) });
    this.stopOrdering = options.client instanceof Cluster || options.perSecondClient !== undefined ? new StopOrdering() : undefined;
    this.fixedWindowStops = this.stopOrdering && new FixedWindowStopBatches(this.stopOrdering);
    // A (re)connected client is worth trying at once, not after the breaker's open time.
    for (const client of this.clients()) {
      client.on('ready', () => {
        for (const side of this.breakers) side.clear();
      });
    }
  }

  async check(checks: readonly LimitCheck[], options: CheckOptions): Promise<LimitResult[]> {
    try {
      return await this.checkOnce(checks, options);
    } catch (err) {
      // A slot moved under a STOP unit of several slots (nothing of it written): planned again,
      // now that node calls are paused, after its place in the order was given up.
      if (!(err instanceof UnitNotServed)) throw err;
      return this.checkOnce(checks, options).catch((again: unknown) => {
        throw again instanceof UnitNotServed ? new BackendUnavailableError('backend unavailable: a slot moved twice under the request') : again;
      });
    }
  }

  private async checkOnce(checks: readonly LimitCheck[], options: CheckOptions): Promise<LimitResult[]> {
    const groups = this.group(checks, this.options.pinnedNow?.() ?? Date.now());
    try {
      admitOrThrow(groups);
    } catch (err) {
      this.options.observer?.refused('breaker_open');
      throw err;
    }
    const ordering = options.stopIncrementWhenOverLimit ? this.stopOrdering : undefined;
    if (ordering === undefined) return this.decide(checks, groups, options);
    const keys = groups.length === 1 ? (groups[0] as SlotGroup).keys : groups.flatMap((g) => g.keys);
    const run = (): Promise<LimitResult[]> => this.decide(checks, groups, options);
    // Decided in one atomic call, a request runs beside others; one that looks and then charges
    // (its counters on several servers) runs alone on its counters in this process.
    if (groups.length === 1 || options.holdBack === true) return ordering.shared(keys, options.deadline, run);
    if (this.stopUnitMode(groups) !== undefined)
      return ordering.shared(keys, options.deadline, () => this.decide(checks, groups, options, 'unit'));
    if (this.fixedWindowStops !== undefined && groups.every((g) => g.algorithm.countsEveryHit || g.algorithm === this.fixedWindowListScript)) {
      return this.fixedWindowStops.join({
        request: this.fixedWindowRequest(checks, groups),
        orderKeys: keys,
        deadline: options.deadline,
        look: () => this.decide(checks, groups, options, 'look'),
        charge: (decision) => this.chargeDecided(checks, groups, options, decision),
      });
    }
    return ordering.exclusive(keys, options.deadline, run);
  }

  /**
   * The request's answers, Redis' failures as the limiter's errors. `only`: just its look (nothing
   * charged), just the stop pass of these groups (FixedWindowStopBatches), or its one
   * lua/stop_request.lua call, as planned (UnitNotServed when it cannot be made any more).
   */
  private async decide(
    checks: readonly LimitCheck[],
    groups: SlotGroup[],
    options: CheckOptions,
    only?: 'look' | 'unit' | SlotGroup[],
  ): Promise<LimitResult[]> {
    try {
      if (only === 'look') return await this.runGroups(checks, groups, 'look', options.deadline);
      if (only === 'unit') return await this.stopRequest(checks, groups, options.deadline, true);
      if (only !== undefined) return await this.runGroups(checks, only, 'stop', options.deadline);
      if (options.holdBack === true) return await this.runGroups(heldBack(checks, groups), groups, 'look', options.deadline);
      return options.stopIncrementWhenOverLimit && groups.length > 1
        ? await this.stopRequest(checks, groups, options.deadline)
        : await this.runGroups(checks, groups, options.stopIncrementWhenOverLimit ? 'stop' : 'count', options.deadline);
    } catch (err) {
      if (err instanceof UnitNotServed) throw err;
      if (err instanceof DeadlineExceededError) this.options.observer?.refused('timeout');
      for (const group of groups) refreshAfterFailure(group.client);
      throw err instanceof DeadlineExceededError || err instanceof BackendUnavailableError
        ? err
        : new BackendUnavailableError(`backend unavailable: ${redisFailure(err)}`, { cause: err });
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
    const side = this.breakers[client === this.options.client ? 0 : 1];
    const nodes = client instanceof Cluster ? client.nodes('master').length : 1;
    let open = 0;
    for (const breaker of side.values()) if (breaker.isOpen) open++;
    return open > 0 && open >= nodes;
  }

  /** Every node's circuit breaker that has seen a call, for the operator metrics. */
  breakerStates(): BreakerState[] {
    const states: BreakerState[] = [];
    this.breakers.forEach((side, i) => {
      for (const [node, breaker] of side) states.push({ node: SIDES[i] + node, open: breaker.isOpen });
    });
    return states;
  }

  /** The batch key of a cluster node's merged calls of one script (negative: never a slot's); undefined outside a cluster. */
  private nodeBatchKey(node: string | undefined, side: 0 | 1, scriptIndex: number): number | undefined {
    if (node === undefined) return undefined;
    let n = this.nodeNumbers.get(node);
    if (n === undefined) this.nodeNumbers.set(node, (n = this.nodeNumbers.size));
    return -1 - ((n * 2 + side) * SCRIPTS_PER_SLOT + scriptIndex);
  }

  /**
   * The circuit breaker of the node that serves `key` on `client` (this limiter's main or
   * per-second client): a command sent beside the scripts (ReferenceCarryOver's GET and SET NX)
   * asks it first and tells it the outcome, so a node that hangs is refused at once for them too.
   */
  breakerOfKey(client: RedisClient, key: string): CircuitBreaker {
    const side = client === this.options.client ? 0 : 1;
    if (!(client instanceof Cluster)) return this.breakerFor(side, 'server');
    const slot = calculateSlot(key);
    return this.breakerFor(side, client.slots[slot]?.[0] ?? `slot ${slot}`);
  }

  private breakerFor(side: 0 | 1, node: string): CircuitBreaker {
    const breakers = this.breakers[side];
    let breaker = breakers.get(node);
    if (breaker === undefined) breakers.set(node, (breaker = this.newBreaker()));
    return breaker;
  }

  /** The checks' script calls; `nowMs` (this process' clock) places each counter's declared key (AlgorithmScript.declaredKey). */
  private group(checks: readonly LimitCheck[], nowMs: number): SlotGroup[] {
    const { client, perSecondClient, keyPrefix } = this.options;
    // A request has a handful of groups at most: a list searched in turn costs less than a Map.
    const groups: SlotGroup[] = [];
    for (let i = 0; i < checks.length; i++) {
      const check = checks[i] as LimitCheck;
      if (check.listSize !== undefined && check.listSize > 1) {
        groups.push(this.listGroup(checks, i, nowMs));
        i += check.listSize - 1;
        continue;
      }
      // REDIS_KEY_LAYOUT=reference: a limit the reference can express counts in its key, named
      // by this process' clock as the reference names it by its own (lib/reference_window_step.lua).
      const shared = this.referenceScript !== undefined && check.spec.shareable === true;
      const key = shared
        ? referenceWindowKey(keyPrefix, check.counter, check.spec.windowSeconds, nowMs)
        : this.scripts[check.spec.algorithm].declaredKey(checkKey(keyPrefix, check), check, nowMs);
      // SECOND-unit limits to REDIS_PERSECOND_URL's Redis, as the reference puts them (in either layout).
      const side = perSecondClient !== undefined && check.spec.windowSeconds === 1 ? 1 : 0;
      const target = side === 1 ? (perSecondClient as RedisClient) : client;
      // Outside a cluster every key lives on one server: one script call for all of them.
      const slot = target instanceof Cluster ? calculateSlot(key) : -1;
      const index = shared ? REFERENCE_WINDOW_INDEX : ALGORITHM_INDEX[check.spec.algorithm];
      const batchKey = ((slot + 1) * 2 + side) * SCRIPTS_PER_SLOT + index;
      let group: SlotGroup | undefined;
      for (const g of groups) {
        if (g.batchKey === batchKey) {
          group = g;
          break;
        }
      }
      if (group === undefined) {
        group = this.newGroup(shared ? this.referenceScript : this.groupScripts[check.spec.algorithm], target, side, slot, batchKey);
        groups.push(group);
      }
      group.keys.push(key);
      group.indexes.push(i);
    }
    return groups;
  }

  private newGroup(kind: GroupScript, target: RedisClient, side: 0 | 1, slot: number, batchKey: number): SlotGroup {
    const served = target instanceof Cluster ? target.slots[slot]?.[0] : undefined;
    const node = target instanceof Cluster ? (served ?? `slot ${slot}`) : 'server';
    const algorithm = kind.script;
    return {
      client: target,
      algorithm,
      algorithmName: kind.name,
      batchKey,
      nodeBatchKey: algorithm.namedMode('count') !== undefined ? this.nodeBatchKey(served, side, kind.index) : undefined,
      breaker: this.breakerFor(side, node),
      node: SIDES[side] + node,
      side,
      slot,
      served,
      keys: [],
      indexes: [],
    };
  }

  /**
   * A `rate_limits` list starting at `first`: one group, decided all or nothing by
   * lua/fixed_window_list.lua when every limit is a fixed window (the lean protocol: issue 21's
   * Redis CPU), else by lua/limit_list.lua. Its keys share the descriptor's hash tag, so one
   * slot. It goes to the main client even with REDIS_PERSECOND: one atomic call cannot span two
   * servers. Count-mode lists of one script to one slot, of this request and of concurrent ones,
   * share a batch key: the coalescer sends them as one call, each list carrying its own header.
   */
  private listGroup(checks: readonly LimitCheck[], first: number, nowMs: number): SlotGroup {
    const { client, keyPrefix } = this.options;
    const size = Math.min((checks[first] as LimitCheck).listSize as number, checks.length - first);
    let fixedWindows = true;
    for (let i = first; i < first + size; i++) if ((checks[i] as LimitCheck).spec.algorithm !== 'fixed_window') fixedWindows = false;
    const [script, name, index] = fixedWindows
      ? [this.fixedWindowListScript, 'fixed_window_list' as const, FIXED_WINDOW_LIST_INDEX]
      : [this.listScript, 'limit_list' as const, LIST_INDEX];
    const keys: string[] = [];
    const indexes: number[] = [];
    for (let i = first; i < first + size; i++) {
      const check = checks[i] as LimitCheck;
      keys.push(script.declaredKey(checkKey(keyPrefix, check), check, nowMs));
      indexes.push(i);
    }
    const slot = client instanceof Cluster ? calculateSlot(keys[0] as string) : -1;
    const served = client instanceof Cluster ? client.slots[slot]?.[0] : undefined;
    const node = client instanceof Cluster ? (served ?? `slot ${slot}`) : 'server';
    return {
      client,
      algorithm: script,
      algorithmName: name,
      // As group()'s batch keys, on the main side (0).
      batchKey: (slot + 1) * 2 * SCRIPTS_PER_SLOT + index,
      nodeBatchKey: this.nodeBatchKey(served, 0, index),
      breaker: this.breakerFor(0, node),
      node: SIDES[0] + node,
      side: 0,
      slot,
      served,
      keys,
      indexes,
    };
  }

  /**
   * STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT for a request of several groups. When they all live on
   * one Redis server (one node of a cluster, one side), the whole request is one atomic call of
   * lua/stop_request.lua, merged with concurrent requests' (issue 27: concurrent requests are then
   * decided one after another). Counters on several servers cannot be decided atomically: look,
   * then charge (stopAcrossGroups).
   */
  private async stopRequest(checks: readonly LimitCheck[], groups: SlotGroup[], deadline: number, planned = false): Promise<LimitResult[]> {
    const unit = this.stopUnitCall(checks, groups, deadline);
    // Planned as one call, it may not be one any more (another request found a slot moving and
    // paused node calls): planned again, in its place in the order.
    if (unit === undefined && planned) throw new UnitNotServed();
    if (unit === undefined) return this.stopAcrossGroups(checks, groups, deadline);
    const pinned = this.options.pinnedNow;
    const reply = await this.coalescer.run(unit.call, pinned === undefined, pinned === undefined ? undefined : [pinned()]);
    const script = this.stopRequestScript;
    if (script.notServedAt(reply, 0)) {
      // A slot moved under the unit: nothing of it was written. Calls go per slot for a while,
      // and check() plans this request again that way (in its place in the order).
      this.nodeMergePausedUntil = Date.now() + NODE_MERGE_PAUSE_MS;
      throw new UnitNotServed();
    }
    const results = new Array<LimitResult>(checks.length);
    unit.indexes.forEach((i, j) => (results[i] = script.decode(reply, j)));
    return results;
  }

  /**
   * Charges what a batch decided for this request: every group when it was admitted, else the
   * groups with a counter of their own that was over (as stopAcrossGroups' second pass), each in
   * its stop pass, which judges again on Redis' count (another process may have charged since the
   * look); the other groups keep the decision's answers.
   */
  private async chargeDecided(
    checks: readonly LimitCheck[],
    groups: SlotGroup[],
    options: CheckOptions,
    decision: FixedWindowStopDecision,
  ): Promise<LimitResult[]> {
    const charged = decision.admitted ? groups : groups.filter((g) => g.indexes.some((i) => decision.over[i] === true));
    const results = decision.results;
    if (charged.length === 0) return results;
    const fromRedis = await this.decide(checks, groups, options, charged);
    for (const g of charged) for (const i of g.indexes) results[i] = fromRedis[i] as LimitResult;
    return results;
  }

  /** A request of fixed windows (of their own, and lists) as FixedWindowStopBatches decides it: each check's key and list. */
  private fixedWindowRequest(checks: readonly LimitCheck[], groups: readonly SlotGroup[]): Omit<FixedWindowStopRequest, 'resetMs'> {
    const keys = new Array<string>(checks.length);
    const parts = new Array<number>(checks.length);
    let lists = 0;
    for (const g of groups) {
      const part = g.algorithm === this.fixedWindowListScript ? ++lists : 0;
      g.indexes.forEach((i, j) => {
        keys[i] = g.keys[j] as string;
        parts[i] = part;
      });
    }
    return { checks, keys, parts };
  }

  /**
   * lua/stop_request.lua's mode for a request of these groups: STOP_REQUEST_MODE when they share
   * a slot (or one Redis server), STOP_REQUEST_NAMED_MODE when they are of several slots of one
   * cluster node (named counters: only on a node the slot map knows, and not while node calls
   * are paused by a resharding); undefined when one atomic call cannot decide them.
   */
  private stopUnitMode(groups: readonly SlotGroup[]): CallMode | undefined {
    if (!onOneServer(groups)) return undefined;
    const first = groups[0] as SlotGroup;
    for (const g of groups) {
      if (g.slot === first.slot) continue;
      return first.served === undefined || Date.now() < this.nodeMergePausedUntil ? undefined : STOP_REQUEST_NAMED_MODE;
    }
    return STOP_REQUEST_MODE;
  }

  /**
   * The one lua/stop_request.lua call that decides a request whose groups are all on one server;
   * undefined when they are not (or, in a cluster whose node calls are paused, span slots).
   */
  private stopUnitCall(
    checks: readonly LimitCheck[],
    groups: readonly SlotGroup[],
    deadline: number,
  ): { call: ScriptCall; indexes: number[] } | undefined {
    const mode = this.stopUnitMode(groups);
    if (mode === undefined) return undefined;
    const first = groups[0] as SlotGroup;
    const named = mode === STOP_REQUEST_NAMED_MODE;
    const script = this.stopRequestScript;
    const keys: string[] = [];
    const indexes: number[] = [];
    const args: (number | string)[] = [0];
    let lists = 0;
    for (const g of groups) {
      const part = g.algorithm === this.listScript || g.algorithm === this.fixedWindowListScript ? ++lists : 0;
      const shared = g.algorithm === this.referenceScript?.script;
      g.indexes.forEach((i, j) => {
        const key = g.keys[j] as string;
        const check = checks[i] as LimitCheck;
        keys.push(key);
        indexes.push(i);
        if (named) args.push(key);
        script.pushArgs(args, part, check, shared ? check.spec.windowSeconds + this.jitter() : undefined);
      });
    }
    args[0] = keys.length;
    const batchKey = named
      ? (this.nodeBatchKey(first.served, first.side, STOP_REQUEST_INDEX) as number)
      : ((first.slot + 1) * 2 + first.side) * SCRIPTS_PER_SLOT + STOP_REQUEST_INDEX;
    const call = {
      batchKey,
      client: first.client,
      script: script.script,
      scriptName: 'stop_request',
      node: first.node,
      mode,
      replyWidth: REPLY_WIDTH,
      breaker: first.breaker,
      keys,
      args,
      deadline,
      keysInArgs: named,
    };
    return { call, indexes };
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
    // A group with a denied counter (its keys are its own: the script's look sees the same) runs
    // in stop mode: its denied counters are charged and its others answered, in order, with the
    // count the charges before them left. A group without one is held back whole: its look is
    // its answer, as nothing of it is charged.
    const overGoing = groups.filter((g) => g.algorithm.countsEveryHit && g.indexes.some((i) => !(looked[i] as LimitResult).allowed));
    if (overGoing.length === 0) return looked;
    const charged = await this.runGroups(checks, overGoing, 'stop', deadline);
    for (const group of overGoing) for (const i of group.indexes) looked[i] = charged[i] as LimitResult;
    return looked;
  }

  /** One script call per group, in parallel; the results in the order of `checks`. */
  private runGroups(checks: readonly LimitCheck[], groups: SlotGroup[], pass: CallPass, deadline: number): Promise<LimitResult[]> {
    const results = new Array<LimitResult>(checks.length);
    if (groups.length === 1) return this.runGroup(checks, groups[0] as SlotGroup, pass, deadline, results).then(() => results);
    return Promise.all(groups.map((g) => this.runGroup(checks, g, pass, deadline, results))).then(() => results);
  }

  private runGroup(checks: readonly LimitCheck[], group: SlotGroup, pass: CallPass, deadline: number, out: LimitResult[]): Promise<void> {
    const algorithm = group.algorithm;
    const pinned = this.options.pinnedNow;
    // Every pass merges, each with calls of its own pass: counts, looks, and fixed_window's stop
    // units (one request's counters each). In STOP mode a request whose counters take several
    // calls looks first, and one held back (the over-limit cache knows a counter of it is over)
    // only looks: under load, as many looks and stop passes as requests. A list's stop pass is a
    // count (a list never charges a denied hit), so it merges as one.
    const mode = algorithm.mode(pass);
    const counting = pass === 'count' || (pass === 'stop' && mode === algorithm.mode('count'));
    const merge = algorithm.coalescible && pinned === undefined;
    // In a cluster, a script's calls merge per node, across its slots, the counters named, for
    // the passes it has a named mode for (fixed_window: all three; the lists: counts).
    const namedMode =
      merge && group.nodeBatchKey !== undefined && Date.now() >= this.nodeMergePausedUntil ? algorithm.namedMode(pass) : undefined;
    const byNode = namedMode !== undefined;
    const passKeys = counting ? 0 : PASS_BATCH_KEYS[pass];
    const args: (number | string)[] = [];
    algorithm.pushGroupHeader(args, group.indexes.length, pass);
    group.indexes.forEach((i, j) => {
      // A node's merged call names each counter before its arguments.
      if (byNode) args.push(group.keys[j] as string);
      algorithm.pushArgs(args, checks[i] as LimitCheck);
    });
    const call = {
      batchKey: byNode ? (group.nodeBatchKey as number) - passKeys : group.batchKey + passKeys,
      client: group.client,
      script: algorithm.script,
      scriptName: group.algorithmName,
      node: group.node,
      mode: byNode ? namedMode : mode,
      replyWidth: algorithm.replyWidth,
      breaker: group.breaker,
      keys: group.keys,
      args,
      deadline,
      keysInArgs: byNode,
    };
    // Every counter's answer; `servedOnly`: those a node's merged call served.
    const decode = (reply: number[], servedOnly = false): void => {
      for (let j = 0; j < group.indexes.length; j++) {
        if (servedOnly && algorithm.notServedAt(reply, j)) continue;
        const i = group.indexes[j] as number;
        out[i] = algorithm.decode(reply, j, checks[i] as LimitCheck, pass);
      }
    };
    if (byNode) {
      // Merged with the node's other slots' calls; what the node does not serve (the slot moved,
      // the slot map is behind, or it refuses the other slots' keys) goes again merged per slot,
      // which ioredis routes to the slot's node (MOVED, ASK), and so do the next minute's calls.
      // Only those counters go again: the others were answered (and counted) on the node. (A
      // list or a stop unit is not served whole: its script writes nothing of it then.)
      return this.coalescer.run(call, true).then((reply) => {
        const again = notServedPart(group, reply);
        if (again === undefined) return decode(reply);
        this.nodeMergePausedUntil = Date.now() + NODE_MERGE_PAUSE_MS;
        decode(reply, true);
        return this.runGroup(checks, again, pass, deadline, out);
      });
    }
    return this.coalescer.run(call, merge, pinned === undefined ? undefined : [pinned()]).then(decode);
  }
}

/** A STOP unit's node no longer serves one of its slots: the request is planned again (check()). Never leaves the limiter. */
class UnitNotServed extends Error {}

/** True when every group goes to one server: one node of a cluster (as the slot map names it), one side. */
function onOneServer(groups: readonly SlotGroup[]): boolean {
  const first = groups[0] as SlotGroup;
  for (const g of groups) if (g.client !== first.client || g.node !== first.node) return false;
  return true;
}

/** The part of `group` that a node's merged call answered as not served (`reply`), as a per-slot group; undefined when none. */
function notServedPart(group: SlotGroup, reply: readonly number[]): SlotGroup | undefined {
  let again: SlotGroup | undefined;
  group.indexes.forEach((i, j) => {
    if (!group.algorithm.notServedAt(reply, j)) return;
    again ??= { ...group, nodeBatchKey: undefined, keys: [], indexes: [] };
    again.keys.push(group.keys[j] as string);
    again.indexes.push(i);
  });
  return again;
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
    throw new BackendUnavailableError('backend unavailable: redis did not answer recently (circuit open; probed again shortly)');
  }
}

/**
 * A call held back whole (another counter of the request is known to be over): a counter that
 * counts every hit is judged as the reference answers a key it increments by 0, by its count
 * as it stands, without the hits (over only when already over its limit).
 */
function heldBack(checks: readonly LimitCheck[], groups: readonly SlotGroup[]): readonly LimitCheck[] {
  const held = [...checks];
  for (const group of groups) {
    if (!group.algorithm.countsEveryHit) continue;
    for (const i of group.indexes) held[i] = { ...(checks[i] as LimitCheck), hits: 0 };
  }
  return held;
}
