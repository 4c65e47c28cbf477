import { afterEach, describe, expect, it } from 'vitest';
import { ALGORITHMS as ALL_ALGORITHMS, type Algorithm } from '../../../src/domain/algorithm';
import type { LimitSpec } from '../../../src/domain/limit-spec';
import type { LimitCheck } from '../../../src/limiter/limiter';
import { MemoryLimiter } from '../../../src/limiter/memory/memory-limiter';
import { ALGORITHM_TRACES, TRACE_START, comparable, randomSteps, seededRandom } from '../../helpers/algorithm-traces';

// The algorithms that count only admitted hits, as far as they are implemented.
const ALGORITHMS = ['sliding_window', 'token_bucket', 'gcra', 'sliding_log'] as const;

const OPTIONS = { deadline: Number.MAX_SAFE_INTEGER, stopIncrementWhenOverLimit: false };
const STOP = { deadline: Number.MAX_SAFE_INTEGER, stopIncrementWhenOverLimit: true };
const DAY = 86_400_000;

let limiters: MemoryLimiter[] = [];
afterEach(async () => {
  await Promise.all(limiters.map((l) => l.close()));
  limiters = [];
});

function setup(start = TRACE_START): { limiter: MemoryLimiter; clock: { now: number } } {
  const clock = { now: start };
  const limiter = new MemoryLimiter({ now: () => clock.now, sweepIntervalMs: 3_600_000 });
  limiters.push(limiter);
  return { limiter, clock };
}

function check(value: string, spec: LimitSpec, hits: number): LimitCheck {
  return { counter: { domain: 'd', entries: [{ key: 'k', value }] }, spec, hits };
}

const spec = (algorithm: Algorithm, limit: number, windowSeconds = 60, burst = limit): LimitSpec => ({ algorithm, limit, windowSeconds, burst });

it('every algorithm has scripted traces', () => {
  for (const algorithm of ALL_ALGORITHMS) {
    expect(ALGORITHM_TRACES[algorithm].length, algorithm).toBeGreaterThan(0);
  }
  expect([...ALGORITHMS].sort()).toEqual(ALL_ALGORITHMS.filter((a) => a !== 'fixed_window').sort());
});

describe.each([...ALL_ALGORITHMS])('MemoryLimiter %s traces', (algorithm) => {
  describe.each(ALGORITHM_TRACES[algorithm].map((t) => [t.name, t] as const))('trace %s', (_name, trace) => {
    it('gives exactly the scripted results', () => {
      const { limiter, clock } = setup();
      for (const [i, step] of trace.steps.entries()) {
        clock.now = TRACE_START + step.at;
        const [result] = limiter.checkNow([check('a', trace.spec, step.hits)], false);
        expect(comparable(result!, step.expected), `step ${i} (at ${step.at}, hits ${step.hits})`).toEqual(step.expected);
      }
    });

    it('keeps at most one state for the counter and drops it once it equals a fresh one', () => {
      const { limiter, clock } = setup();
      let last = 0;
      for (const step of trace.steps) {
        clock.now = TRACE_START + step.at;
        limiter.checkNow([check('a', trace.spec, step.hits)], false);
        expect(limiter.size).toBeLessThanOrEqual(1);
        last = step.at;
      }
      clock.now = TRACE_START + last + 2 * trace.spec.windowSeconds * 1000 + trace.spec.burst * trace.spec.windowSeconds * 1000;
      limiter.sweep();
      expect(limiter.size).toBe(0);
    });
  });
});

it('MemoryLimiter fixed_window: a clock more than one window back finds no count there and keeps none (the latest two windows are kept)', () => {
  // Redis keeps a key per window instead (lua-fixed-window.test.ts pins that corner there).
  const { limiter, clock } = setup();
  const s = spec('fixed_window', 3, 10);
  const at = (ms: number, hits: number) => {
    clock.now = TRACE_START + ms;
    return limiter.checkNow([check('a', s, hits)], false)[0]!;
  };
  expect(at(0, 2).used).toBe(2);
  expect(at(25_000, 2).used).toBe(2);
  expect(at(5_000, 1)).toMatchObject({ allowed: true, used: 1, remaining: 2, resetMs: 5_000 });
  expect(at(5_000, 0)).toMatchObject({ allowed: true, used: 0, remaining: 3 });
  expect(at(29_999, 1)).toMatchObject({ used: 3, remaining: 0, resetMs: 1 });
});

describe.each(ALGORITHMS)('MemoryLimiter %s', (algorithm) => {
  it('a peek never creates state; a denied or peeked call never changes it', () => {
    const { limiter, clock } = setup();
    const s = spec(algorithm, 3);
    expect(limiter.checkNow([check('a', s, 0)], false)[0]).toMatchObject({ allowed: true, used: 0, remaining: 3, retryAfterMs: 0 });
    expect(limiter.size).toBe(0);
    limiter.checkNow([check('a', s, 3)], false);
    clock.now += 1;
    const before = limiter.checkNow([check('a', s, 0)], false)[0];
    expect(limiter.checkNow([check('a', s, 1)], false)[0]!.allowed).toBe(false);
    expect(limiter.checkNow([check('a', s, 0)], false)[0]).toEqual(before);
    expect(limiter.size).toBe(1);
  });

  it('the state of a charge is dropped by sweep() exactly when it becomes fresh, not before', () => {
    const { limiter, clock } = setup(TRACE_START + 12_345);
    const s = spec(algorithm, 5, 10);
    const [r] = limiter.checkNow([check('a', s, 2)], false);
    limiter.sweep();
    expect(limiter.size).toBe(1);
    clock.now += r!.resetMs - 1;
    limiter.sweep();
    expect(limiter.size).toBe(1);
    clock.now += 1;
    limiter.sweep();
    expect(limiter.size).toBe(0);
    expect(limiter.checkNow([check('a', s, 0)], false)[0]).toMatchObject({ used: 0, remaining: 5, resetMs: 0 });
  });

  it('bounded memory: 1000 counters touched once are all swept', () => {
    const { limiter, clock } = setup();
    for (let i = 0; i < 1000; i++) limiter.checkNow([check(`c${i}`, spec(algorithm, 10, 1), 1 + (i % 3))], false);
    expect(limiter.size).toBe(1000);
    clock.now += 2000;
    limiter.sweep();
    expect(limiter.size).toBe(0);
  });

  it('stop mode: one denied counter charges none; otherwise all are charged', async () => {
    const { limiter } = setup();
    const tight = spec(algorithm, 2);
    const loose = spec(algorithm, 100);
    await limiter.check([check('tight', tight, 2)], OPTIONS);
    const held = await limiter.check([check('loose', loose, 5), check('tight', tight, 1), check('fw', spec('fixed_window', 10), 1)], STOP);
    expect(held.map((r) => r.allowed)).toEqual([true, false, true]);
    expect(held[0]).toMatchObject({ used: 0, remaining: 100 });
    expect(limiter.size).toBe(1);
    const passed = await limiter.check([check('loose', loose, 5), check('tight', tight, 0)], STOP);
    expect(passed.map((r) => [r.allowed, r.used])).toEqual([
      [true, 5],
      [true, 2],
    ]);
    // Without the option, the admitted counter is charged and the denied one is not.
    const each = await limiter.check([check('loose', loose, 1), check('tight', tight, 1)], OPTIONS);
    expect(each.map((r) => [r.allowed, r.used])).toEqual([
      [true, 6],
      [false, 2],
    ]);
  });

  it('200 concurrent calls against a limit of 50 admit exactly 50', async () => {
    const { limiter } = setup();
    const s = spec(algorithm, 50, 86_400);
    const results = await Promise.all(Array.from({ length: 200 }, () => limiter.check([check('hot', s, 1)], OPTIONS)));
    expect(results.filter(([r]) => r!.allowed)).toHaveLength(50);
  });

  it('only admitted hits count: after a storm of denials the counter admits again on time', () => {
    const { limiter, clock } = setup();
    const s = spec(algorithm, 5, 10);
    limiter.checkNow([check('a', s, 5)], false);
    let retry = 0;
    for (let i = 0; i < 100; i++) {
      const [r] = limiter.checkNow([check('a', s, 1)], false);
      expect(r!.allowed).toBe(false);
      retry = r!.retryAfterMs;
    }
    expect(retry).toBeGreaterThan(0);
    clock.now += retry - 1;
    expect(limiter.checkNow([check('a', s, 1)], false)[0]!.allowed).toBe(false);
    clock.now += 1;
    expect(limiter.checkNow([check('a', s, 1)], false)[0]!.allowed).toBe(true);
  });

  it('retryAfterMs is exact on a random trace: denied 1 ms before it, admitted at it', () => {
    const random = seededRandom(7);
    let probes = 0;
    for (let round = 0; round < 30; round++) {
      const { limiter, clock } = setup(TRACE_START + random(DAY));
      const s = spec(algorithm, 1 + random(8), [1, 7, 60][random(3)], 1 + random(8));
      const value = `r${round}`;
      const capacity = algorithm === 'token_bucket' || algorithm === 'gcra' ? s.burst : s.limit;
      const attempt = (hits: number) => limiter.checkNow([check(value, s, hits)], false)[0]!;
      for (const step of randomSteps(round, 40, 800, 3)) {
        clock.now += step.at % 800;
        const hits = Math.min(step.hits, capacity);
        const denied = attempt(hits);
        if (denied.allowed) continue;
        // A denial charges nothing, so the same request 1 ms early is still denied, and on time it is admitted.
        const at = clock.now;
        probes++;
        clock.now = at + denied.retryAfterMs - 1;
        if (denied.retryAfterMs > 1) expect(attempt(hits).allowed, `${JSON.stringify(s)} hits ${hits}`).toBe(false);
        clock.now = at + denied.retryAfterMs;
        expect(attempt(hits).allowed, `${JSON.stringify(s)} hits ${hits}`).toBe(true);
      }
    }
    expect(probes).toBeGreaterThan(50);
  });
});

describe('token_bucket and gcra', () => {
  it('answer identically to the same random hits, whatever the limit, window and burst', () => {
    const random = seededRandom(2024);
    for (let round = 0; round < 50; round++) {
      const { limiter, clock } = setup(TRACE_START + random(DAY));
      const limit = 1 + random(20);
      const windowSeconds = [1, 3, 60, 3600][random(4)]!;
      const burst = 1 + random(30);
      for (const step of randomSteps(round, 60, 1500, 6)) {
        clock.now += step.at % 1500;
        const [tb, gc] = limiter.checkNow(
          [
            check('x', spec('token_bucket', limit, windowSeconds, burst), step.hits),
            check('x', spec('gcra', limit, windowSeconds, burst), step.hits),
          ],
          false,
        );
        expect(gc).toEqual(tb);
      }
    }
  });

  it('burst above the limit: a full bucket admits `burst` at once, then one per emission interval', () => {
    const { limiter, clock } = setup();
    for (const algorithm of ['token_bucket', 'gcra'] as const) {
      const s = spec(algorithm, 10, 60, 20);
      const admitted = Array.from({ length: 25 }, () => limiter.checkNow([check('b', s, 1)], false)[0]!.allowed).filter(Boolean);
      expect(admitted).toHaveLength(20);
      const [denied] = limiter.checkNow([check('b', s, 1)], false);
      expect(denied).toMatchObject({ allowed: false, remaining: 0, used: 20, retryAfterMs: 6000, resetMs: 120_000 });
    }
    clock.now += 6000;
    expect(limiter.checkNow([check('b', spec('gcra', 10, 60, 20), 2)], false)[0]).toMatchObject({ allowed: false, retryAfterMs: 6000 });
    expect(limiter.checkNow([check('b', spec('token_bucket', 10, 60, 20), 1)], false)[0]).toMatchObject({ allowed: true, remaining: 0 });
  });
});
