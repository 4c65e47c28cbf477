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
  }

  tierChange(domain: string, from: number, to: number): void {
    this.changes.inc({ domain, from: TIERS[from], to: TIERS[to] });
  }

  unavailable(domain: string): void {
    this.failures.inc({ domain });
  }
}
