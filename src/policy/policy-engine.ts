import type { DescriptorEntry } from '../domain/descriptor';
import type { PolicyMetrics } from '../metrics/policy-metrics';
import { TIER_BLOCKED, TIER_NORMAL, TIERS, tierLimitPercent, type PolicyConfig, type Tier } from '../domain/policy-config';
import { policyParams, type PolicyOutcome, type PolicyParams } from './policy-model';
import type { PolicyStore } from './policy-store';
import { signalHash } from './signal-hash';

/** What the policy decided for one request. */
export interface PolicyDecision {
  readonly policy: PolicyConfig;
  readonly client: string;
  /** The tier the model gave (reported, also in shadow mode); normal when the state was not read. */
  readonly tier: Tier;
  /** The share of every limit this request gets, in percent: 100 in shadow mode and on failure. */
  readonly limitPercent: number;
  /** Enforced penalty box: ms until it ends; 0 when not blocked (or in shadow mode). */
  readonly blockedMsLeft: number;
}

export interface PolicyEngineDeps {
  readonly store: PolicyStore;
  readonly metrics: PolicyMetrics;
  /** Clients with denials waiting to be reported; beyond it the least recently denied is dropped. */
  readonly maxPendingDenials?: number;
  /** Clock in epoch ms (tests); the store keeps its own. */
  readonly now?: () => number;
}

/** Denials of one client not yet reported, all within one window of the policy. */
interface PendingDenials {
  count: number;
  /** The end of the window they were given in (epoch ms): then they are no signal any more. */
  windowEnd: number;
}

/** What the policy reads of a request: its descriptors' entries. */
interface DescribedRequest {
  readonly descriptors: readonly { readonly entries: readonly DescriptorEntry[] }[];
}

/** The first value of `key` among the request's descriptors; undefined when none carries it. */
function entryValue(request: DescribedRequest, key: string | undefined): string | undefined {
  if (key === undefined) return undefined;
  for (const d of request.descriptors) for (const e of d.entries) if (e.key === key) return e.value;
  return undefined;
}

/**
 * Every change of tier a decision found or made: the steps down time made since the client's
 * previous decision (the box's end, one per quiet period), then this request's step up.
 */
function countTierChanges(metrics: PolicyMetrics, domain: string, o: PolicyOutcome): void {
  for (let t = o.previousTier; t > o.settledTier; t--) metrics.tierChange(domain, t, t - 1);
  if (o.tier !== o.settledTier) metrics.tierChange(domain, o.settledTier, o.tier);
}

/**
 * The policy layer as the service sees it: finds the client of a request, asks the store for
 * its tier (one call), and turns the tier into what the limits get. Denials travel with the
 * client's next decision on this instance, so a request costs one store call at most.
 */
export class PolicyEngine {
  private readonly params = new WeakMap<PolicyConfig, PolicyParams>();
  /** Least recently denied first (a denial moves its client to the end). */
  private readonly pendingDenials = new Map<string, PendingDenials>();
  private readonly maxPending: number;
  private readonly now: () => number;

  constructor(private readonly deps: PolicyEngineDeps) {
    this.maxPending = deps.maxPendingDenials ?? 10_000;
    this.now = deps.now ?? Date.now;
  }

  /** The client a request names for `policy`; undefined: the policy does not apply (no call). */
  clientOf(policy: PolicyConfig, request: DescribedRequest): string | undefined {
    return entryValue(request, policy.client);
  }

  /**
   * The tier for this request, which includes this request's own signals. Half of the time left
   * is the policy's; when the store cannot answer in it, the normal tier applies (counted).
   */
  async decide(policy: PolicyConfig, client: string, request: DescribedRequest, deadline: number): Promise<PolicyDecision> {
    const { store, metrics } = this.deps;
    const route = entryValue(request, policy.route);
    const fingerprint = entryValue(request, policy.fingerprint);
    const denials = this.takeDenials(policy.domain + '\u0000' + client);
    const now = Date.now();
    let outcome: PolicyOutcome;
    try {
      outcome = await store.decide(
        policy,
        this.paramsOf(policy),
        client,
        {
          routeHash: route === undefined ? 0 : signalHash(route),
          fingerprintHash: fingerprint === undefined ? 0 : signalHash(fingerprint),
          denials,
        },
        now + Math.max(0, Math.floor((deadline - now) / 2)),
      );
    } catch {
      metrics.unavailable(policy.domain);
      metrics.decision(policy.domain, TIER_NORMAL, policy.shadowMode);
      return { policy, client, tier: 'normal', limitPercent: 100, blockedMsLeft: 0 };
    }
    metrics.decision(policy.domain, outcome.tier, policy.shadowMode);
    countTierChanges(metrics, policy.domain, outcome);
    const enforced = policy.shadowMode ? TIER_NORMAL : outcome.tier;
    return {
      policy,
      client,
      tier: TIERS[outcome.tier] as Tier,
      limitPercent: tierLimitPercent(policy, enforced),
      blockedMsLeft: enforced === TIER_BLOCKED ? outcome.blockedMsLeft : 0,
    };
  }

  /**
   * Whether the counter keyed by `entries` is the decision's client's own: its descriptor
   * carries the client entry. Only a denial by such a limit is a signal against the client; a
   * limit it shares with others (a route's, or a `share_threshold` wildcard's) says nothing of
   * it, since another client may have spent it.
   */
  ownsCounter(decision: PolicyDecision, entries: readonly DescriptorEntry[]): boolean {
    const key = decision.policy.client;
    for (const e of entries) if (e.key === key && e.value === decision.client) return true;
    return false;
  }

  /** The client was denied by a limit of its own: the denial goes with its next decision. */
  noteDenial(decision: PolicyDecision): void {
    const key = decision.policy.domain + '\u0000' + decision.client;
    const now = this.now();
    const windowMs = decision.policy.windowSeconds * 1000;
    const windowEnd = now - (now % windowMs) + windowMs;
    let pending = this.pendingDenials.get(key);
    if (pending !== undefined) {
      this.pendingDenials.delete(key);
      // Denials of a window that has ended are no signal of this one.
      if (pending.windowEnd !== windowEnd) pending = { count: 0, windowEnd };
    } else {
      this.makeRoom(now);
      pending = { count: 0, windowEnd };
    }
    pending.count++;
    this.pendingDenials.set(key, pending);
  }

  /** Clients with denials waiting to be reported (tests). */
  get pendingClients(): number {
    return this.pendingDenials.size;
  }

  /** The client's denials still in their window, removed from the map; 0 for none. */
  private takeDenials(key: string): number {
    const pending = this.pendingDenials.get(key);
    if (pending === undefined) return 0;
    this.pendingDenials.delete(key);
    return pending.windowEnd > this.now() ? pending.count : 0;
  }

  /**
   * Room for one more client: the expired go first (from the least recently denied on, so
   * each is looked at once), then, while it is still full, the least recently denied: the
   * newest denials are kept, since those still go with a decision soon.
   */
  private makeRoom(now: number): void {
    const map = this.pendingDenials;
    for (const [key, pending] of map) {
      if (map.size < this.maxPending && pending.windowEnd > now) return;
      map.delete(key);
    }
  }

  /** The client's current signals and tier (debug port). */
  lookUp(policy: PolicyConfig, client: string, deadline: number): Promise<PolicyOutcome> {
    return this.deps.store.lookUp(policy, this.paramsOf(policy), client, deadline);
  }

  /** Opens the store's connection (the app does so when the rules have a policy). */
  connect(): void {
    this.deps.store.connect();
  }

  isReady(): boolean {
    return this.deps.store.isReady();
  }

  close(): Promise<void> {
    return this.deps.store.close();
  }

  private paramsOf(policy: PolicyConfig): PolicyParams {
    let p = this.params.get(policy);
    if (p === undefined) this.params.set(policy, (p = policyParams(policy)));
    return p;
  }
}
