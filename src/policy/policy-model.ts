import { routeCap, fingerprintCap, TIER_BLOCKED, TIER_ELEVATED, TIER_NORMAL, TIER_SUSPICIOUS, type PolicyConfig } from '../domain/policy-config';

/**
 * The policy model, step by step, as plain code. The memory store runs it; lua/policy.lua is
 * the same steps in Lua, and one trace suite holds both to the same answers.
 *
 * One decision for one client at `now`:
 *  1. A blocked client whose box has run out drops to suspicious; its quiet time starts then.
 *  2. Quiet periods: for every whole `quiet` period since the client last behaved at (or above)
 *     its tier, it goes down one tier, down to normal. (The state is kept one quiet period
 *     longer, so the decision after that still sees the tier it steps down from.)
 *  3. Signals live in epoch-aligned windows of `window` ms: a new window starts them from zero.
 *  4. Still blocked: nothing is counted, the answer is blocked with the time left.
 *  5. Otherwise the request is counted: +1 request, the denials reported since the client's
 *     last decision, its route into the set of distinct routes (at most routeCap), its
 *     fingerprint: a repeat when already in the window's set, else remembered (at most
 *     fingerprintCap).
 *  6. score = Σ weight × signal; the target is the highest tier whose threshold the score
 *     reaches. Above the current tier: up ONE tier (blocked starts the box). At the current
 *     tier: the quiet time starts again.
 */

/** The numbers of a policy that a decision needs; built once per policy. */
export interface PolicyParams {
  readonly windowMs: number;
  readonly weightRequests: number;
  readonly weightRepeats: number;
  readonly weightRoutes: number;
  readonly weightDenials: number;
  readonly elevatedAt: number;
  readonly suspiciousAt: number;
  readonly blockedAt: number;
  readonly blockedMs: number;
  readonly quietMs: number;
  readonly routeCap: number;
  readonly fingerprintCap: number;
}

export function policyParams(p: PolicyConfig): PolicyParams {
  return {
    windowMs: p.windowSeconds * 1000,
    weightRequests: p.weights.requests,
    weightRepeats: p.weights.repeats,
    weightRoutes: p.weights.routes,
    weightDenials: p.weights.denials,
    elevatedAt: p.thresholds.elevated,
    suspiciousAt: p.thresholds.suspicious,
    blockedAt: p.thresholds.blocked,
    blockedMs: p.blockedSeconds * 1000,
    quietMs: p.quietSeconds * 1000,
    routeCap: routeCap(p),
    fingerprintCap: fingerprintCap(p),
  };
}

/** What one request brings to its client's decision. Hashes: 0 = the request has none. */
export interface PolicyInput {
  readonly routeHash: number;
  readonly fingerprintHash: number;
  /** Denials the client received since its previous decision (reported by this instance). */
  readonly denials: number;
}

/** A client's state; what Redis keeps in three keys (state hash, routes set, fingerprints set). */
export interface PolicyState {
  tier: number;
  /** Since when the client has been quiet (ms). */
  calm: number;
  /** While blocked: when the box ends (ms). */
  until: number;
  /** Start of the signals' window (ms); -1 for none. */
  window: number;
  requests: number;
  repeats: number;
  denials: number;
  readonly routes: Set<number>;
  readonly fingerprints: Set<number>;
}

/** The answer of one decision (also of a look-up, which changes nothing). */
export interface PolicyOutcome {
  readonly tier: number;
  /** The tier stored before this decision. */
  readonly previousTier: number;
  /** The tier after the steps time alone makes (the box's end, quiet periods), before this request's signals. */
  readonly settledTier: number;
  /** While blocked: ms until the box ends; else 0. */
  readonly blockedMsLeft: number;
  readonly requests: number;
  readonly repeats: number;
  readonly routes: number;
  readonly denials: number;
  readonly score: number;
}

export function newPolicyState(now: number): PolicyState {
  return { tier: TIER_NORMAL, calm: now, until: 0, window: -1, requests: 0, repeats: 0, denials: 0, routes: new Set(), fingerprints: new Set() };
}

function targetTier(p: PolicyParams, score: number): number {
  if (score >= p.blockedAt) return TIER_BLOCKED;
  if (score >= p.suspiciousAt) return TIER_SUSPICIOUS;
  if (score >= p.elevatedAt) return TIER_ELEVATED;
  return TIER_NORMAL;
}

/**
 * One decision at `now` (ms). `update` false is a look-up: `s` is not changed (the caller
 * passes a copy or discards it). Returns the outcome; `s` holds the new state.
 */
export function decide(s: PolicyState, p: PolicyParams, input: PolicyInput, now: number, update: boolean): PolicyOutcome {
  const previousTier = s.tier;
  endBlockWhenDue(s, now);
  stepDownWhenQuiet(s, p, now);
  const settledTier = s.tier;
  enterWindow(s, p, now);
  const counts = update && s.tier < TIER_BLOCKED;
  if (counts) countRequest(s, p, input);
  const score = scoreOf(s, p);
  if (counts) stepUpTowards(s, p, targetTier(p, score), now);
  return {
    tier: s.tier,
    previousTier,
    settledTier,
    blockedMsLeft: s.tier === TIER_BLOCKED ? s.until - now : 0,
    requests: s.requests,
    repeats: s.repeats,
    routes: s.routes.size,
    denials: s.denials,
    score,
  };
}

/** A block that has run its time becomes suspicious, calm since the block ended. */
function endBlockWhenDue(s: PolicyState, now: number): void {
  if (s.tier === TIER_BLOCKED && now >= s.until) {
    s.tier = TIER_SUSPICIOUS;
    s.calm = s.until;
  }
}

/** Below blocked, each full quiet period since the last calm moment lowers the tier one step. */
function stepDownWhenQuiet(s: PolicyState, p: PolicyParams, now: number): void {
  if (s.tier > TIER_NORMAL && s.tier < TIER_BLOCKED && now - s.calm >= p.quietMs) {
    const steps = Math.floor((now - s.calm) / p.quietMs);
    s.tier = Math.max(TIER_NORMAL, s.tier - steps);
    s.calm += steps * p.quietMs;
  }
}

/** A new window starts every count from zero. */
function enterWindow(s: PolicyState, p: PolicyParams, now: number): void {
  const window = now - (now % p.windowMs);
  if (s.window !== window) {
    s.window = window;
    s.requests = s.repeats = s.denials = 0;
    s.routes.clear();
    s.fingerprints.clear();
  }
}

/** Counts one request: its denials, its route (up to the cap), a repeated fingerprint. */
function countRequest(s: PolicyState, p: PolicyParams, input: PolicyInput): void {
  s.requests += 1;
  s.denials += input.denials;
  if (input.routeHash !== 0 && p.routeCap > 0 && s.routes.size < p.routeCap) s.routes.add(input.routeHash);
  if (input.fingerprintHash !== 0 && p.fingerprintCap > 0) {
    if (s.fingerprints.has(input.fingerprintHash)) s.repeats += 1;
    else if (s.fingerprints.size < p.fingerprintCap) s.fingerprints.add(input.fingerprintHash);
  }
}

function scoreOf(s: PolicyState, p: PolicyParams): number {
  return p.weightRequests * s.requests + p.weightRepeats * s.repeats + p.weightRoutes * s.routes.size + p.weightDenials * s.denials;
}

/** One step up at most per request; a score that holds the tier keeps it calm. */
function stepUpTowards(s: PolicyState, p: PolicyParams, target: number, now: number): void {
  if (target > s.tier) {
    s.tier += 1;
    s.calm = now;
    if (s.tier === TIER_BLOCKED) s.until = now + p.blockedMs;
  } else if (target === s.tier) {
    s.calm = now;
  }
}

/**
 * When the state stops mattering (ms): the window's end, or one quiet period after the tier is
 * back to normal. That last period keeps the raised tier readable, so that a decision in it
 * still sees (and the engine counts) the steps back to normal.
 */
export function stateExpiresAt(s: PolicyState, p: PolicyParams): number {
  const windowEnd = s.window + p.windowMs;
  if (s.tier === TIER_BLOCKED) return Math.max(windowEnd, s.until + (TIER_SUSPICIOUS + 1) * p.quietMs);
  return s.tier === TIER_NORMAL ? windowEnd : Math.max(windowEnd, s.calm + (s.tier + 1) * p.quietMs);
}
