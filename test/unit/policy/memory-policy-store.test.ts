import { describe, expect, it } from 'vitest';
import { MemoryPolicyStore } from '../../../src/policy/memory-policy-store';
import { decide, newPolicyState, policyParams } from '../../../src/policy/policy-model';
import { expectConcurrentEqualsSerial } from '../../helpers/policy-concurrency';
import { MemoryLimiter } from '../../../src/limiter/memory/memory-limiter';
import {
  POLICY_TRACES,
  REQUEST_TRACES,
  TRACE_POLICY,
  TRACE_START,
  requestTraceService,
  runPolicyTrace,
  runRequestTrace,
} from '../../helpers/policy-traces';

describe('memory policy store: the shared traces', () => {
  it.each(POLICY_TRACES.map((t) => [t.name, t] as const))('%s', async (_name, t) => {
    const clock = { now: TRACE_START };
    const store = new MemoryPolicyStore({ now: () => clock.now });
    const got = await runPolicyTrace(store, clock, t);
    expect(got).toEqual(t.steps.map((s) => s.expected));
  });
});

describe('memory policy store and limiter: the shared request traces', () => {
  it.each(REQUEST_TRACES.map((t) => [t.name, t] as const))('%s', async (_name, t) => {
    const clock = { now: TRACE_START };
    const limiter = new MemoryLimiter({ now: () => clock.now });
    const service = requestTraceService(limiter, new MemoryPolicyStore({ now: () => clock.now }));
    const got = await runRequestTrace(service, clock, t);
    await limiter.close();
    expect(got).toEqual(t.steps.map((s) => s.expected));
  });
});

describe('policy model', () => {
  it('remembers at most routeCap distinct routes per window', () => {
    const params = { ...policyParams(TRACE_POLICY), routeCap: 2, weightRoutes: 0 };
    const s = newPolicyState(TRACE_START);
    for (let r = 1; r <= 5; r++) decide(s, params, { routeHash: r, fingerprintHash: 0, denials: 0 }, TRACE_START, true);
    expect(s.routes.size).toBe(2);
  });

  it('forgets a client whose state expired, and keeps at most maxClients', async () => {
    const clock = { now: TRACE_START };
    const store = new MemoryPolicyStore({ now: () => clock.now, maxClients: 3 });
    const params = policyParams(TRACE_POLICY);
    for (let i = 0; i < 10; i++) await store.decide(TRACE_POLICY, params, `c${i}`, { routeHash: 0, fingerprintHash: 0, denials: 0 });
    expect(store.size).toBe(3);
  });
});

describe('memory policy store: concurrency', () => {
  it('200 concurrent calls of one client end as the same calls one at a time', async () => {
    const clock = { now: TRACE_START };
    await expectConcurrentEqualsSerial([new MemoryPolicyStore({ now: () => clock.now })], 'mem');
  });
});
