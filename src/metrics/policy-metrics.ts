import { Counter, type Registry } from 'prom-client';
import { TIERS } from '../domain/policy-config';

/** What the policy layer reports: counts per domain and tier, never a client value. */
export interface PolicyMetrics {
  decision(domain: string, tier: number, shadow: boolean): void;
  tierChange(domain: string, from: number, to: number): void;
  /** The policy state could not be read in time: the decision used the normal tier. */
  unavailable(domain: string): void;
}

export class PrometheusPolicyMetrics implements PolicyMetrics {
  private readonly decisions: Counter<'domain' | 'tier' | 'shadow'>;
  private readonly changes: Counter<'domain' | 'from' | 'to'>;
  private readonly failures: Counter<'domain'>;
  /** Domains whose moves into the blocked tier are exported (at 0 until the first one). */
  private readonly domainsSeen = new Set<string>();

  constructor(registry: Registry) {
    const registers = [registry];
    this.decisions = new Counter({
      name: 'floodgate_policy_decisions_total',
      help: 'Policy decisions by the tier they gave',
      labelNames: ['domain', 'tier', 'shadow'],
      registers,
    });
    this.changes = new Counter({
      name: 'floodgate_policy_tier_changes_total',
      help: 'Clients moved from one tier to another',
      labelNames: ['domain', 'from', 'to'],
      registers,
    });
    this.failures = new Counter({
      name: 'floodgate_policy_unavailable_total',
      help: 'Decisions that used the normal tier because the policy state could not be read in time',
      labelNames: ['domain'],
      registers,
    });
  }

  decision(domain: string, tier: number, shadow: boolean): void {
    this.decisions.inc({ domain, tier: TIERS[tier], shadow: shadow ? 'true' : 'false' });
    if (!this.domainsSeen.has(domain)) this.firstDecision(domain);
  }

  /**
   * The moves into the blocked tier exist at 0 from a domain's first decision: Prometheus'
   * increase() sees nothing in a series whose first sample is already 1, so without this the
   * alert on clients being blocked would miss each domain's first one (deploy/.../alert-rules.yaml).
   * Domains come from the rules, so the series stay few.
   */
  private firstDecision(domain: string): void {
    this.domainsSeen.add(domain);
    for (const from of TIERS.slice(0, -1)) this.changes.inc({ domain, from, to: 'blocked' }, 0);
  }

  tierChange(domain: string, from: number, to: number): void {
    this.changes.inc({ domain, from: TIERS[from], to: TIERS[to] });
  }

  unavailable(domain: string): void {
    this.failures.inc({ domain });
  }
}
