import type { PolicyConfig } from '../../src/domain/policy-config';
import { policyParams, type PolicyOutcome } from '../../src/policy/policy-model';
import type { PolicyStore } from '../../src/policy/policy-store';
import { signalHash } from '../../src/policy/signal-hash';
import { TRACE_START } from './algorithm-traces';
import { compileRules } from '../../src/config/compile-rules';
import { parseRuleFile } from '../../src/config/parse-rule-file';
import type { Limiter } from '../../src/limiter/limiter';
import { PrometheusMetrics } from '../../src/metrics/metrics';
import { PrometheusPolicyMetrics } from '../../src/metrics/policy-metrics';
import { PolicyEngine } from '../../src/policy/policy-engine';
import { RateLimitService } from '../../src/service/rate-limit-service';

/**
 * Scripted traces of the policy model, written once and run against both stores: the memory
 * store (unit test, injected clock) and lua/policy.lua on real Redis, standalone and cluster
 * (integration test, pinned time). Every expected row was worked out by hand from the model in
 * src/policy/policy-model.ts with TRACE_POLICY: a request scores 1, a repeated fingerprint 3,
 * each distinct route 3, each denial 5; elevated at 10, suspicious at 20, blocked at 40.
 */
export const TRACE_POLICY: PolicyConfig = Object.freeze({
  domain: 'traces',
  client: 'remote_address',
  route: 'path',
  fingerprint: 'request_hash',
  windowSeconds: 10,
  weights: { requests: 1, repeats: 3, routes: 3, denials: 5 },
  thresholds: { elevated: 10, suspicious: 20, blocked: 40 },
  limitPercent: { elevated: 50, suspicious: 10 },
  blockedSeconds: 60,
  quietSeconds: 30,
  shadowMode: false,
});

export { TRACE_START };

export interface PolicyStep {
  /** ms after TRACE_START. */
  readonly at: number;
  readonly client: string;
  /** 'decide' counts the request; 'look' is a look-up that changes nothing. */
  readonly op: 'decide' | 'look';
  readonly routeHash: number;
  readonly fingerprintHash: number;
  readonly denials: number;
  readonly expected: PolicyOutcome;
}

export interface PolicyTrace {
  readonly name: string;
  readonly steps: readonly PolicyStep[];
}

type Row = readonly [
  at: number,
  client: string,
  op: 'd' | 'l',
  route: string | null,
  fingerprint: string | null,
  denials: number,
  tier: number,
  previous: number,
  left: number,
  requests: number,
  repeats: number,
  routes: number,
  denialsSeen: number,
  score: number,
  /** The tier after time's steps; when left out: tier when it went down, else previous. */
  settled?: number,
];

function trace(name: string, rows: readonly Row[]): PolicyTrace {
  return {
    name,
    steps: rows.map(
      ([at, client, op, route, fp, denials, tier, previousTier, blockedMsLeft, requests, repeats, routes, denialsSeen, score, settled]) => ({
        at,
        client,
        op: op === 'd' ? 'decide' : 'look',
        routeHash: route === null ? 0 : signalHash(route),
        fingerprintHash: fp === null ? 0 : signalHash(fp),
        denials,
        expected: {
          tier,
          previousTier,
          settledTier: settled ?? (tier < previousTier ? tier : previousTier),
          blockedMsLeft,
          requests,
          repeats,
          routes,
          denials: denialsSeen,
          score,
        },
      }),
    ),
  };
}

// A: bursts, then keeps calling while denied (one denial reported with each call).
// W: well-behaved, in the same domain at the same time.
//                                                   tier prev left   req rep rts den score
export const POLICY_TRACES: readonly PolicyTrace[] = [
  trace('burst, then hammering while denied: normal → elevated → suspicious → blocked, the box, then quiet steps down', [
    [0, 'A', 'd', '/a', 'f1', 0, 0, 0, 0, 1, 0, 1, 0, 4],
    [0, 'W', 'd', '/home', 'w1', 0, 0, 0, 0, 1, 0, 1, 0, 4],
    [100, 'A', 'd', '/a', 'f2', 0, 0, 0, 0, 2, 0, 1, 0, 5],
    [200, 'A', 'd', '/a', 'f3', 0, 0, 0, 0, 3, 0, 1, 0, 6],
    [300, 'A', 'd', '/a', 'f4', 0, 0, 0, 0, 4, 0, 1, 0, 7],
    [400, 'A', 'd', '/a', 'f5', 0, 0, 0, 0, 5, 0, 1, 0, 8],
    [500, 'A', 'd', '/a', 'f6', 0, 0, 0, 0, 6, 0, 1, 0, 9],
    [500, 'W', 'd', '/home', 'w2', 0, 0, 0, 0, 2, 0, 1, 0, 5],
    // The burst alone reaches elevated.
    [600, 'A', 'd', '/a', 'f7', 0, 1, 0, 0, 7, 0, 1, 0, 10],
    [700, 'A', 'd', '/a', 'f8', 0, 1, 1, 0, 8, 0, 1, 0, 11],
    // Denied from here on: every call reports the previous call's denial.
    [800, 'A', 'd', '/a', 'f9', 1, 1, 1, 0, 9, 0, 1, 1, 17],
    [900, 'A', 'd', '/a', 'f10', 1, 2, 1, 0, 10, 0, 1, 2, 23],
    [1_000, 'A', 'd', '/a', 'f11', 1, 2, 2, 0, 11, 0, 1, 3, 29],
    [1_000, 'W', 'd', '/home', 'w3', 0, 0, 0, 0, 3, 0, 1, 0, 6],
    [1_100, 'A', 'd', '/a', 'f12', 1, 2, 2, 0, 12, 0, 1, 4, 35],
    // 41 >= 40: blocked, for exactly 60 s from now (1 200 .. 61 200).
    [1_200, 'A', 'd', '/a', 'f13', 1, 3, 2, 60_000, 13, 0, 1, 5, 41],
    // In the box nothing is counted.
    [1_300, 'A', 'd', '/a', 'f14', 1, 3, 3, 59_900, 13, 0, 1, 5, 41],
    [30_000, 'W', 'd', '/home', 'w4', 0, 0, 0, 0, 1, 0, 1, 0, 4],
    [61_199, 'A', 'l', null, null, 0, 3, 3, 1, 0, 0, 0, 0, 0],
    [61_199, 'A', 'd', '/a', 'f15', 0, 3, 3, 1, 0, 0, 0, 0, 0],
    // The box is over: suspicious, and the quiet time starts at its end.
    [61_200, 'A', 'd', '/a', 'f16', 0, 2, 3, 0, 1, 0, 1, 0, 4],
    [61_200, 'W', 'd', '/home', 'w5', 0, 0, 0, 0, 1, 0, 1, 0, 4],
    [91_199, 'A', 'd', '/a', 'f17', 0, 2, 2, 0, 1, 0, 1, 0, 4],
    [91_200, 'A', 'd', '/a', 'f18', 0, 1, 2, 0, 2, 0, 1, 0, 5],
    [121_199, 'A', 'l', null, null, 0, 1, 1, 0, 0, 0, 0, 0, 0],
    // Back to normal, and its state kept one more quiet period: this decision sees the step
    // down (counted as a change of tier), and a new window starts the signals afresh.
    [121_200, 'A', 'd', '/a', 'f19', 0, 0, 1, 0, 1, 0, 1, 0, 4],
    [121_200, 'W', 'l', null, null, 0, 0, 0, 0, 0, 0, 0, 0, 0],
  ]),
  trace('a scanner is raised by distinct routes alone; the same calls on one route stay normal', [
    [0, 'S', 'd', '/r1', 's1', 0, 0, 0, 0, 1, 0, 1, 0, 4],
    [0, 'W', 'd', '/home', 'w1', 0, 0, 0, 0, 1, 0, 1, 0, 4],
    [1, 'S', 'd', '/r2', 's2', 0, 0, 0, 0, 2, 0, 2, 0, 8],
    [1, 'W', 'd', '/home', 'w2', 0, 0, 0, 0, 2, 0, 1, 0, 5],
    [2, 'S', 'd', '/r3', 's3', 0, 1, 0, 0, 3, 0, 3, 0, 12],
    [2, 'W', 'd', '/home', 'w3', 0, 0, 0, 0, 3, 0, 1, 0, 6],
    [3, 'S', 'd', '/r4', 's4', 0, 1, 1, 0, 4, 0, 4, 0, 16],
    [3, 'W', 'd', '/home', 'w4', 0, 0, 0, 0, 4, 0, 1, 0, 7],
    // A route seen before in the window is no new route.
    [4, 'S', 'd', '/r1', 's5', 0, 1, 1, 0, 5, 0, 4, 0, 17],
  ]),
  trace('a replayer is raised by repeated fingerprints alone; distinct fingerprints stay normal', [
    [0, 'R', 'd', '/r', 'same', 0, 0, 0, 0, 1, 0, 1, 0, 4],
    [0, 'W', 'd', '/r', 'w1', 0, 0, 0, 0, 1, 0, 1, 0, 4],
    [1, 'R', 'd', '/r', 'same', 0, 0, 0, 0, 2, 1, 1, 0, 8],
    [1, 'W', 'd', '/r', 'w2', 0, 0, 0, 0, 2, 0, 1, 0, 5],
    [2, 'R', 'd', '/r', 'same', 0, 1, 0, 0, 3, 2, 1, 0, 12],
    [2, 'W', 'd', '/r', 'w3', 0, 0, 0, 0, 3, 0, 1, 0, 6],
    [3, 'R', 'd', '/r', 'same', 0, 1, 1, 0, 4, 3, 1, 0, 16],
    [3, 'W', 'd', '/r', 'w4', 0, 0, 0, 0, 4, 0, 1, 0, 7],
    // A new window forgets the fingerprints.
    [10_000, 'R', 'd', '/r', 'same', 0, 1, 1, 0, 1, 0, 1, 0, 4],
  ]),
  trace('no route or fingerprint entry: requests and denials only', [[0, 'N', 'd', null, null, 2, 1, 0, 0, 1, 0, 0, 2, 11]]),
  trace('one decision finds the client back at normal and raises it again: both changes are seen', [
    ...Array.from({ length: 9 }, (_, i): Row => [i, 'E', 'd', null, null, 0, 0, 0, 0, i + 1, 0, 0, 0, i + 1]),
    [9, 'E', 'd', null, null, 0, 1, 0, 0, 10, 0, 0, 0, 10],
    // One quiet period since its last call at elevated (calm 9): settled at normal, then its
    // reported denials raise it again. Stored elevated, answered elevated, normal in between.
    [40_000, 'E', 'd', null, null, 2, 1, 1, 0, 1, 0, 0, 2, 11, 0],
    // Back at normal after another quiet period, then a quiet period more: the state is gone.
    [100_000, 'E', 'l', null, null, 0, 0, 0, 0, 0, 0, 0, 0, 0],
  ]),
];

/** Runs one trace on `store` (the clock set to each step's time) and returns what it answered, in order. */
export async function runPolicyTrace(
  store: PolicyStore,
  clock: { now: number },
  t: PolicyTrace,
  policy: PolicyConfig = TRACE_POLICY,
): Promise<PolicyOutcome[]> {
  const params = policyParams(policy);
  const out: PolicyOutcome[] = [];
  for (const step of t.steps) {
    clock.now = TRACE_START + step.at;
    const deadline = Date.now() + 5000;
    out.push(
      step.op === 'decide'
        ? await store.decide(
            policy,
            params,
            step.client,
            { routeHash: step.routeHash, fingerprintHash: step.fingerprintHash, denials: step.denials },
            deadline,
          )
        : await store.lookUp(policy, params, step.client, deadline),
    );
  }
  return out;
}

// ---- request traces: the same policy through the whole service (limits, denials, tiers) ----

/**
 * A domain whose limits are of two kinds: `path=/login` is one counter that every client
 * shares, `remote_address` is each client's own. A denial is a signal against a client only
 * when the limit that denied is its own: the counter's descriptor carries the client entry.
 * Requests weigh 1 and denials 10: elevated at 40, suspicious at 50, blocked at 60.
 */
export const SHARED_LIMIT_RULES = `
domain: shared
policy:
  client: remote_address
  window_seconds: 60
  weights: { requests: 1, repeats: 0, routes: 0, denials: 10 }
  thresholds: { elevated: 40, suspicious: 50, blocked: 60 }
  limit_percent: { elevated: 50, suspicious: 10 }
  blocked_seconds: 60
  quiet_seconds: 60
descriptors:
  - key: path
    value: /login
    rate_limit: { unit: minute, requests_per_unit: 20 }
  - key: remote_address
    rate_limit: { unit: minute, requests_per_unit: 25 }
`;

export interface RequestStep {
  /** ms after TRACE_START. */
  readonly at: number;
  readonly client: string;
  readonly path: string;
  readonly expected: { readonly code: 'OK' | 'OVER_LIMIT'; readonly tier: string };
}

export interface RequestTrace {
  readonly name: string;
  readonly steps: readonly RequestStep[];
}

function requests(from: number, client: string, path: string, codes: readonly (readonly ['OK' | 'OVER_LIMIT', string])[]): RequestStep[] {
  return codes.map(([code, tier], i) => ({ at: from + i, client, path, expected: { code, tier } }));
}

const times = <T>(n: number, row: T): T[] => Array.from({ length: n }, () => row);

export const REQUEST_TRACES: readonly RequestTrace[] = [
  {
    name: 'an attacker spends the shared 20/min login limit: a bystander is denied, but not blamed; its own limit still is',
    steps: [
      // A: 20 logins, scores 1..20: normal; the shared counter is spent.
      ...requests(0, 'A', '/login', times(20, ['OK', 'normal'] as const)),
      // B: 8 login tries, each denied by the shared counter. Its score stays its requests
      // (1..8): the denials are not B's. (Blamed, it scored 1, 12, 23, 34, 45, 56, 67 and
      // went elevated, suspicious, blocked.)
      ...requests(100, 'B', '/login', times(8, ['OVER_LIMIT', 'normal'] as const)),
      // B's other pages answer as ever.
      ...requests(200, 'B', '/home', [['OK', 'normal']]),
      // C spends its own 25/min: those denials are its own. Scores 26, 27+10, 28+20 (elevated),
      // 29+30 (suspicious), 30+40 (blocked).
      ...requests(300, 'C', '/home', times(25, ['OK', 'normal'] as const)),
      ...requests(400, 'C', '/home', [
        ['OVER_LIMIT', 'normal'],
        ['OVER_LIMIT', 'normal'],
        ['OVER_LIMIT', 'elevated'],
        ['OVER_LIMIT', 'suspicious'],
        ['OVER_LIMIT', 'blocked'],
      ]),
    ],
  },
];

/** The service of SHARED_LIMIT_RULES on `limiter` and `store` (both on the caller's clock). */
export function requestTraceService(limiter: Limiter, store: PolicyStore): RateLimitService {
  const rules = compileRules([parseRuleFile('shared.yaml', SHARED_LIMIT_RULES)], { mergeDomainConfig: false });
  const metrics = new PrometheusMetrics();
  return new RateLimitService({
    rules: () => rules,
    limiter,
    metrics,
    policy: new PolicyEngine({ store, metrics: new PrometheusPolicyMetrics(metrics.registry) }),
    config: {
      shadowMode: false,
      quotaMode: false,
      stopIncrementWhenOverLimit: false,
      nearLimitRatio: 0.8,
      responseDynamicMetadata: true,
      requestLimits: { maxDescriptors: 8, maxEntries: 4, maxKeyBytes: 64, maxValueBytes: 64 },
    },
  });
}

/** Runs one request trace (the clock set to each step's time) and returns each answer's code and tier. */
export async function runRequestTrace(service: RateLimitService, clock: { now: number }, t: RequestTrace): Promise<RequestStep['expected'][]> {
  const out: RequestStep['expected'][] = [];
  for (const step of t.steps) {
    clock.now = TRACE_START + step.at;
    const res = await service.shouldRateLimit(
      {
        domain: 'shared',
        descriptors: [{ entries: [{ key: 'remote_address', value: step.client }] }, { entries: [{ key: 'path', value: step.path }] }],
        hitsAddend: 1,
      },
      Date.now() + 5000,
    );
    out.push({ code: res.overallCode, tier: res.dynamicMetadata?.['floodgate.tier'] as string });
  }
  return out;
}
