/**
 * A domain's adaptive policy, validated and frozen: which descriptor entries identify the
 * client (and optionally its route and a request fingerprint), how signals in one window add
 * up to a risk score, and what each tier does to the limits.
 */

/** Risk tiers, in order. Their index is what the stores and the Lua script carry. */
export const TIERS = ['normal', 'elevated', 'suspicious', 'blocked'] as const;
export type Tier = (typeof TIERS)[number];

export const TIER_NORMAL = 0;
export const TIER_ELEVATED = 1;
export const TIER_SUSPICIOUS = 2;
export const TIER_BLOCKED = 3;

/** Points each signal adds to the score, per unit, within one window. */
export interface SignalWeights {
  /** Per request. */
  readonly requests: number;
  /** Per request whose fingerprint was already seen in the window. */
  readonly repeats: number;
  /** Per distinct route in the window. */
  readonly routes: number;
  /** Per denial the client received. */
  readonly denials: number;
}

/** Lowest score that reaches each tier; strictly rising. */
export interface TierThresholds {
  readonly elevated: number;
  readonly suspicious: number;
  readonly blocked: number;
}

/** The share of every limit a client keeps in a tier, in percent (normal 100, blocked 0). */
export interface TierLimitPercent {
  readonly elevated: number;
  readonly suspicious: number;
}

export interface PolicyConfig {
  /** The rule file's domain. */
  readonly domain: string;
  /** Descriptor entry key whose value identifies the client. */
  readonly client: string;
  /** Descriptor entry key whose value is the route; absent: no route signal. */
  readonly route?: string;
  /** Descriptor entry key whose value is a request fingerprint; absent: no repeat signal. */
  readonly fingerprint?: string;
  readonly windowSeconds: number;
  readonly weights: SignalWeights;
  readonly thresholds: TierThresholds;
  readonly limitPercent: TierLimitPercent;
  readonly blockedSeconds: number;
  readonly quietSeconds: number;
  /** Compute, report and count tiers, but enforce the normal limits. */
  readonly shadowMode: boolean;
}

/**
 * Distinct routes worth remembering per window: beyond the count whose weight alone reaches
 * `blocked`, more routes cannot change the tier, so the set stays this small (0: not tracked).
 */
export function routeCap(policy: PolicyConfig): number {
  if (policy.route === undefined || policy.weights.routes === 0) return 0;
  return Math.ceil(policy.thresholds.blocked / policy.weights.routes);
}

/**
 * Distinct fingerprints remembered per window (0: not tracked). A new fingerprint beyond this
 * is not remembered, so a later repeat of it is not counted: the signal errs on the lenient side.
 */
export const FINGERPRINT_CAP = 64;

export function fingerprintCap(policy: PolicyConfig): number {
  return policy.fingerprint === undefined || policy.weights.repeats === 0 ? 0 : FINGERPRINT_CAP;
}

/** The share of limits a tier leaves, in percent. */
export function tierLimitPercent(policy: PolicyConfig, tier: number): number {
  if (tier === TIER_NORMAL) return 100;
  if (tier === TIER_ELEVATED) return policy.limitPercent.elevated;
  if (tier === TIER_SUSPICIOUS) return policy.limitPercent.suspicious;
  return 0;
}

/** One line for `/rlconfig`. */
export function describePolicy(p: PolicyConfig): string {
  const w = p.weights;
  const t = p.thresholds;
  return (
    `${p.domain}: policy client=${p.client} route=${p.route ?? '-'} fingerprint=${p.fingerprint ?? '-'} window_seconds=${p.windowSeconds}` +
    ` weights=requests:${w.requests},repeats:${w.repeats},routes:${w.routes},denials:${w.denials}` +
    ` thresholds=elevated:${t.elevated},suspicious:${t.suspicious},blocked:${t.blocked}` +
    ` limit_percent=elevated:${p.limitPercent.elevated},suspicious:${p.limitPercent.suspicious}` +
    ` blocked_seconds=${p.blockedSeconds} quiet_seconds=${p.quietSeconds}, shadow_mode: ${p.shadowMode}`
  );
}
