import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { PrometheusPolicyMetrics } from '../../../src/metrics/policy-metrics';
import { MemoryPolicyStore } from '../../../src/policy/memory-policy-store';
import { PolicyEngine, type PolicyDecision } from '../../../src/policy/policy-engine';
import type { RateLimitRequest } from '../../../src/service/types';
import { TRACE_POLICY, TRACE_START } from '../../helpers/policy-traces';

// The denials an instance holds until a client's next decision (PolicyEngine): bounded, they
// expire with the policy's window, and when the map is full the newest are kept.
function setUp(maxPendingDenials?: number) {
  const clock = { now: TRACE_START };
  const engine = new PolicyEngine({
    store: new MemoryPolicyStore({ now: () => clock.now }),
    metrics: new PrometheusPolicyMetrics(new Registry()),
    now: () => clock.now,
    ...(maxPendingDenials !== undefined ? { maxPendingDenials } : {}),
  });
  const request = (client: string): RateLimitRequest => ({
    domain: 'traces',
    descriptors: [{ entries: [{ key: 'remote_address', value: client }] }],
    hitsAddend: 1,
  });
  const decide = (client: string): Promise<PolicyDecision> => engine.decide(TRACE_POLICY, client, request(client), Date.now() + 1000);
  return { clock, engine, decide };
}

describe('pending denials', () => {
  it('10,000 one-off clients denied once do not crowd out an abuser: it still reaches blocked', async () => {
    const { clock, engine, decide } = setUp();
    for (let i = 0; i < 10_000; i++) engine.noteDenial(await decide(`one-off-${i}`));
    clock.now += 100;
    // The abuser hammers while denied: each call reports the previous call's denial
    // (TRACE_POLICY: a request scores 1, a denial 5, blocked at 40).
    const tiers: string[] = [];
    for (let i = 0; i < 12; i++) {
      const d = await decide('abuser');
      tiers.push(d.tier);
      if (d.blockedMsLeft === 0) engine.noteDenial(d);
      clock.now += 1;
    }
    console.log(`abuser after 10,000 one-off denials: ${tiers.join(' ')}`);
    expect(tiers).toContain('blocked');
    expect(engine.pendingClients).toBeLessThanOrEqual(10_000);
  });

  it('a denial expires with the window it was given in', async () => {
    const { clock, engine, decide } = setUp();
    engine.noteDenial(await decide('late'));
    // The next call comes in the next 10-second window: the old window's denial is gone.
    clock.now += 10_000;
    await decide('late');
    expect((await engine.lookUp(TRACE_POLICY, 'late', Date.now() + 1000)).denials).toBe(0);
    engine.noteDenial(await decide('soon'));
    clock.now += 100;
    await decide('soon');
    expect((await engine.lookUp(TRACE_POLICY, 'soon', Date.now() + 1000)).denials).toBe(1);
  });

  it('expired entries leave the map; when it is full the oldest go and the newest stay', async () => {
    const { clock, engine, decide } = setUp(3);
    for (const c of ['a', 'b', 'c']) engine.noteDenial(await decide(c));
    clock.now += 10_000;
    engine.noteDenial(await decide('d'));
    // a, b and c expired with their window: only d is held.
    expect(engine.pendingClients).toBe(1);
    for (const c of ['e', 'f', 'g']) engine.noteDenial(await decide(c));
    expect(engine.pendingClients).toBe(3);
    // Full: d (the oldest) went, g (the newest) stayed.
    clock.now += 1;
    await decide('d');
    await decide('g');
    expect((await engine.lookUp(TRACE_POLICY, 'd', Date.now() + 1000)).denials).toBe(0);
    expect((await engine.lookUp(TRACE_POLICY, 'g', Date.now() + 1000)).denials).toBe(1);
  });
});
