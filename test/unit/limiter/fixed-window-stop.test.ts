// Issue 27: STOP-mode requests of fixed windows over several Redis servers are decided in the
// process, in turn, on the counts their batch looked at (decideFixedWindowStop). Those decisions
// must be STOP mode's rule exactly: here a random trace of requests (counters of their own,
// counters named twice, `rate_limits` lists of fixed windows, hits 0..3, small limits) is decided
// by decideFixedWindowStop on one counts map and by the memory backend (whose STOP mode the
// differential suite checks against the reference model), and every answer and count must agree.
import { describe, expect, it } from 'vitest';
import { checkKey } from '../../../src/limiter/counter-key';
import type { LimitCheck, LimitResult } from '../../../src/limiter/limiter';
import { MemoryLimiter } from '../../../src/limiter/memory/memory-limiter';
import { decideFixedWindowStop } from '../../../src/limiter/redis/fixed-window-stop';

const NOW = 1_800_000_000_000 + 1234;
const HOUR = 3600;

/** A small deterministic generator (mulberry32), so that a failure replays. */
function random(seed: number): (n: number) => number {
  let a = seed >>> 0;
  return (n) => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * n);
  };
}

const spec = (limit: number, windowSeconds = HOUR) => ({ algorithm: 'fixed_window' as const, limit, windowSeconds, burst: limit });
const single = (c: number, limit: number, hits: number): LimitCheck => ({
  counter: { domain: 'fws', entries: [{ key: 'c', value: String(c) }] },
  spec: spec(limit),
  hits,
});
/** A list on descriptor `d`: an hour and a day. */
const list = (d: number, hour: number, day: number, hits: number): LimitCheck[] => [
  { counter: { domain: 'fws', entries: [{ key: 'l', value: String(d) }] }, spec: spec(hour), hits, listSize: 2 },
  { counter: { domain: 'fws', entries: [{ key: 'l', value: String(d) }] }, spec: spec(day, 86_400), hits },
];

function request(r: (n: number) => number): LimitCheck[] {
  const checks: LimitCheck[] = [];
  const parts = 1 + r(3);
  // A list at most once per request: the memory backend charges a list named twice member by
  // member once nothing denies, where Redis decides each all or nothing (not this suite's point).
  const listed = new Set<number>();
  for (let p = 0; p < parts; p++) {
    const d = r(2);
    if (r(3) === 0 && !listed.has(d)) {
      listed.add(d);
      checks.push(...list(d, 3 + r(3), 5 + r(4), r(3)));
    }
    // Limits per counter fixed (a counter's limit is its rule's), hits 0..3.
    else {
      const c = r(4);
      checks.push(single(c, [2, 3, 5, 1][c]!, r(4)));
    }
  }
  return checks;
}

/** Each check's list: 0 for a counter of its own, p for list p (as the Redis limiter numbers them). */
function partsOf(checks: readonly LimitCheck[]): number[] {
  const parts: number[] = [];
  let lists = 0;
  for (let i = 0; i < checks.length; i++) {
    const size = checks[i]!.listSize ?? 1;
    const part = size > 1 ? ++lists : 0;
    for (let j = 0; j < size; j++) parts.push(part);
    i += size - 1;
  }
  return parts;
}

const plain = (r: LimitResult) => `${r.allowed ? 'OK' : 'OVER'}/${r.used}/${r.remaining}/${r.retryAfterMs > 0}/${r.blockedForMs! > 0}`;

describe('decideFixedWindowStop', () => {
  it.each([1, 2, 3, 4, 5, 6, 7, 8])('decides a random trace as the memory backend in STOP mode (seed %d)', (seed) => {
    const r = random(seed);
    const memory = new MemoryLimiter({ now: () => NOW, sweepIntervalMs: 3_600_000 });
    const counts = new Map<string, number>();
    let denied = 0;
    for (let step = 0; step < 300; step++) {
      const checks = request(r);
      const want = memory.checkNow(checks, true).map(plain);
      const keys = checks.map((c) => checkKey('p:', c));
      const resetMs = checks.map((c) => c.spec.windowSeconds * 1000 - (NOW % (c.spec.windowSeconds * 1000)));
      const got = decideFixedWindowStop({ checks, keys, parts: partsOf(checks), resetMs }, counts).results.map(plain);
      expect(got, `step ${step}: ${JSON.stringify(checks.map((c) => [c.counter.entries[0]!.value, c.spec.limit, c.hits, c.listSize]))}`).toEqual(
        want,
      );
      denied += want.filter((a) => a.startsWith('OVER')).length;
    }
    // Every counter's count agrees too.
    const every = [0, 1, 2, 3].map((c) => single(c, 100, 0)).concat(list(0, 100, 100, 0), list(1, 100, 100, 0));
    const looked = memory.checkNow(
      every.map(({ counter, spec: s }) => ({ counter, spec: s, hits: 0 })),
      false,
    );
    expect(every.map((c) => counts.get(checkKey('p:', c)) ?? 0)).toEqual(looked.map((l) => l.used));
    expect(denied).toBeGreaterThan(50);
    void memory.close();
  });
});
