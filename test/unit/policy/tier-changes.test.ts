import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { PrometheusPolicyMetrics } from '../../../src/metrics/policy-metrics';
import { MemoryPolicyStore } from '../../../src/policy/memory-policy-store';
import { PolicyEngine } from '../../../src/policy/policy-engine';
import type { RateLimitRequest } from '../../../src/service/types';
import { TRACE_POLICY, TRACE_START } from '../../helpers/policy-traces';

// floodgate_policy_tier_changes_total counts every change of tier, the steps down too: a decay
// is counted at the client's next decision, one step per quiet period, also when that decision
// comes after the tier is back at normal (issue 17: the step back to normal was never counted,
// since the state had expired by then).
function setUp() {
  const clock = { now: TRACE_START };
  const registry = new Registry();
  const engine = new PolicyEngine({ store: new MemoryPolicyStore({ now: () => clock.now }), metrics: new PrometheusPolicyMetrics(registry) });
  const request: RateLimitRequest = { domain: 'traces', descriptors: [{ entries: [{ key: 'remote_address', value: 'c' }] }], hitsAddend: 1 };
  const decide = async (): Promise<string> => (await engine.decide(TRACE_POLICY, 'c', request, Date.now() + 1000)).tier;
  const changes = async (): Promise<Record<string, number>> => {
    const out: Record<string, number> = {};
    // The changes counted: the moves into blocked exist at 0 from the first decision (below).
    for (const v of (await registry.getSingleMetric('floodgate_policy_tier_changes_total')!.get()).values) {
      if (v.value > 0) out[`${v.labels.from}>${v.labels.to}`] = v.value;
    }
    return out;
  };
  const zeros = async (): Promise<string[]> =>
    (await registry.getSingleMetric('floodgate_policy_tier_changes_total')!.get()).values
      .filter((v) => v.value === 0)
      .map((v) => `${v.labels.domain} ${v.labels.from}>${v.labels.to}`);
  return { clock, decide, changes, zeros };
}

/** TRACE_POLICY: a request scores 1, elevated at 10, suspicious at 20; quiet 30 s; window 10 s. */
async function raise(decide: () => Promise<string>, clock: { now: number }, calls: number): Promise<string> {
  let tier = 'normal';
  for (let i = 0; i < calls; i++) {
    tier = await decide();
    clock.now += 1;
  }
  return tier;
}

describe('tier changes', () => {
  // Issue 28: the alert on clients entering the blocked tier uses increase(), which sees nothing
  // in a series whose first sample is already 1.
  it("a domain's moves into blocked are exported at 0 from its first decision", async () => {
    const { decide, zeros } = setUp();
    expect(await zeros()).toEqual([]);
    await decide();
    expect((await zeros()).sort()).toEqual(['traces elevated>blocked', 'traces normal>blocked', 'traces suspicious>blocked']);
  });

  it('elevated, then back to normal after a quiet period: the step down is counted at the next decision', async () => {
    const { clock, decide, changes } = setUp();
    expect(await raise(decide, clock, 10)).toBe('elevated');
    clock.now += 30_000 + 5_000;
    expect(await decide()).toBe('normal');
    expect(await changes()).toEqual({ 'normal>elevated': 1, 'elevated>normal': 1 });
  });

  it('suspicious, then two quiet periods: both steps down are counted', async () => {
    const { clock, decide, changes } = setUp();
    expect(await raise(decide, clock, 20)).toBe('suspicious');
    clock.now += 60_000 + 5_000;
    expect(await decide()).toBe('normal');
    expect(await changes()).toEqual({ 'normal>elevated': 1, 'elevated>suspicious': 1, 'suspicious>elevated': 1, 'elevated>normal': 1 });
  });

  it('a decision that finds the client decayed and raises it again counts both changes', async () => {
    const { clock, decide, changes } = setUp();
    expect(await raise(decide, clock, 10)).toBe('elevated');
    // One quiet period later, in a window of its own, a burst of 10 raises it again.
    clock.now = TRACE_START + 40_000;
    expect(await raise(decide, clock, 10)).toBe('elevated');
    expect(await changes()).toEqual({ 'normal>elevated': 2, 'elevated>normal': 1 });
  });
});
