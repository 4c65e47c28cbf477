import { expect } from 'vitest';
import { TIER_BLOCKED } from '../../src/domain/policy-config';
import { policyParams, type PolicyOutcome } from '../../src/policy/policy-model';
import type { PolicyStore } from '../../src/policy/policy-store';
import { signalHash } from '../../src/policy/signal-hash';
import { TRACE_POLICY } from './policy-traces';

const CALLS = 200;

function tierCounts(outcomes: readonly PolicyOutcome[]): number[] {
  const counts = [0, 0, 0, 0];
  for (const o of outcomes) counts[o.tier]!++;
  return counts;
}

/**
 * 200 calls of one client at once, against the same 200 calls of another client one at a time
 * (same store, same clock): no decision moves a client up more than one tier, the concurrent
 * calls get exactly the tiers the serial ones get (as a multiset: their order is Redis'), and
 * the final states are equal.
 */
export async function expectConcurrentEqualsSerial(stores: readonly PolicyStore[], prefix: string): Promise<void> {
  const params = policyParams(TRACE_POLICY);
  const input = { routeHash: signalHash('/x'), fingerprintHash: signalHash('same'), denials: 0 };
  const deadline = Date.now() + 30_000;
  const concurrent = await Promise.all(
    Array.from({ length: CALLS }, (_, i) => stores[i % stores.length]!.decide(TRACE_POLICY, params, `${prefix}-together`, input, deadline)),
  );
  const serial: PolicyOutcome[] = [];
  for (let i = 0; i < CALLS; i++) serial.push(await stores[0]!.decide(TRACE_POLICY, params, `${prefix}-alone`, input, deadline));

  for (const o of [...concurrent, ...serial]) expect(o.tier - o.previousTier).toBeLessThanOrEqual(1);
  // Score k + 3 + 3(k − 1): elevated at call 3, suspicious at 5, blocked at 10 (one step per call).
  expect(tierCounts(serial)).toEqual([2, 2, 5, 191]);
  expect(tierCounts(concurrent)).toEqual(tierCounts(serial));
  expect(concurrent.filter((o) => o.tier !== o.previousTier).length).toBe(TIER_BLOCKED);
  const [together, alone] = await Promise.all([
    stores[0]!.lookUp(TRACE_POLICY, params, `${prefix}-together`, deadline),
    stores[0]!.lookUp(TRACE_POLICY, params, `${prefix}-alone`, deadline),
  ]);
  expect(together).toEqual(alone);
  expect(alone.tier).toBe(TIER_BLOCKED);
}
