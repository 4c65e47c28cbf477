import { describe, expect, it } from 'vitest';
import { hitCounts } from '../../../src/service/hit-counts';

const zero = { withinLimit: 0, nearLimit: 0, overLimit: 0, overLimitWithLocalCache: 0, shadowMode: 0 };

/** Counts for a fixed-window evaluation: `before` counted so far, `hits` added now. */
function counts(limit: number, before: number, hits: number, opts: { ratio?: number; local?: boolean; shadow?: boolean } = {}) {
  const used = before + hits;
  return hitCounts({
    limit,
    used,
    hits,
    allowed: used <= limit,
    nearLimitRatio: opts.ratio ?? 0.8,
    fromLocalCache: opts.local ?? false,
    shadow: opts.shadow ?? false,
  });
}

describe('hitCounts: limit 10, NEAR_LIMIT_RATIO 0.8 (near threshold 8)', () => {
  it.each([1, 2, 5, 8])('hit number %d is within and not near', (n) => {
    expect(counts(10, n - 1, 1)).toEqual({ ...zero, totalHits: 1, withinLimit: 1 });
  });

  it.each([9, 10])('hit number %d is within and near', (n) => {
    expect(counts(10, n - 1, 1)).toEqual({ ...zero, totalHits: 1, withinLimit: 1, nearLimit: 1 });
  });

  it.each([11, 12, 50])('hit number %d is over only', (n) => {
    expect(counts(10, n - 1, 1)).toEqual({ ...zero, totalHits: 1, overLimit: 1 });
  });

  it('splits hits that cross the near threshold: 5 → 9 is 4 within, 1 near', () => {
    expect(counts(10, 5, 4)).toEqual({ ...zero, totalHits: 4, withinLimit: 4, nearLimit: 1 });
  });

  it('counts all hits near when already past the near threshold: 8 → 10', () => {
    expect(counts(10, 8, 2)).toEqual({ ...zero, totalHits: 2, withinLimit: 2, nearLimit: 2 });
  });

  it('splits hits that cross the limit: 5 → 11 is 2 near (9, 10) and 1 over, none within', () => {
    expect(counts(10, 5, 6)).toEqual({ ...zero, totalHits: 6, nearLimit: 2, overLimit: 1 });
  });

  it('splits hits that cross the limit from above the near line: 9 → 13 is 1 near, 3 over', () => {
    expect(counts(10, 9, 4)).toEqual({ ...zero, totalHits: 4, nearLimit: 1, overLimit: 3 });
  });

  it('counts all hits over when the count was already at the limit', () => {
    expect(counts(10, 10, 3)).toEqual({ ...zero, totalHits: 3, overLimit: 3 });
    expect(counts(10, 15, 3)).toEqual({ ...zero, totalHits: 3, overLimit: 3 });
  });

  it('counts all refused hits over when the algorithm did not count them (used <= limit)', () => {
    expect(hitCounts({ limit: 10, used: 9, hits: 3, allowed: false, nearLimitRatio: 0.8, fromLocalCache: false, shadow: false })).toEqual({
      ...zero,
      totalHits: 3,
      overLimit: 3,
    });
  });

  it('a peek (hits 0) adds nothing anywhere', () => {
    expect(counts(10, 9, 0)).toEqual({ ...zero, totalHits: 0 });
    expect(hitCounts({ limit: 10, used: 12, hits: 0, allowed: false, nearLimitRatio: 0.8, fromLocalCache: false, shadow: false })).toEqual({
      ...zero,
      totalHits: 0,
    });
  });
});

describe('hitCounts: other limits and ratios', () => {
  it('limit 0 puts every hit over', () => {
    expect(counts(0, 0, 1)).toEqual({ ...zero, totalHits: 1, overLimit: 1 });
  });

  it('ratio 1 has no near band below the limit', () => {
    expect(counts(10, 9, 1, { ratio: 1 })).toEqual({ ...zero, totalHits: 1, withinLimit: 1 });
  });

  it('ratio 0 makes every allowed hit near', () => {
    expect(counts(10, 0, 1, { ratio: 0 })).toEqual({ ...zero, totalHits: 1, withinLimit: 1, nearLimit: 1 });
  });

  it('floors the threshold: limit 7 × 0.8 = 5.6 → near from the 6th hit', () => {
    expect(counts(7, 4, 1).nearLimit).toBe(0);
    expect(counts(7, 5, 1).nearLimit).toBe(1);
  });

  // The reference computes float32(limit) * float32(NEAR_LIMIT_RATIO) in float32 arithmetic.
  it.each<[number, number, number]>([
    [900, 0.13, 116], // float64 arithmetic would say 117
    [500, 0.502, 250], // float64 arithmetic would say 251
  ])('uses float32 arithmetic like the reference: limit %d × %d → threshold %d', (limit, ratio, threshold) => {
    expect(counts(limit, threshold - 1, 1, { ratio }).nearLimit).toBe(0);
    expect(counts(limit, threshold, 1, { ratio })).toEqual({ ...zero, totalHits: 1, withinLimit: 1, nearLimit: 1 });
  });
});

describe('hitCounts: local cache and shadow mode', () => {
  it('an answer from the local over-limit cache is over and over_with_local_cache', () => {
    expect(hitCounts({ limit: 10, used: 0, hits: 3, allowed: false, nearLimitRatio: 0.8, fromLocalCache: true, shadow: false })).toEqual({
      ...zero,
      totalHits: 3,
      overLimit: 3,
      overLimitWithLocalCache: 3,
    });
  });

  it('shadow mode counts the hits over the limit, as over_limit does (the reference)', () => {
    expect(counts(10, 10, 2, { shadow: true })).toEqual({ ...zero, totalHits: 2, overLimit: 2, shadowMode: 2 });
    expect(counts(10, 5, 6, { shadow: true })).toEqual({ ...zero, totalHits: 6, nearLimit: 2, overLimit: 1, shadowMode: 1 });
    // 11 hits in one call on a 10/second rule: one of them is over.
    expect(counts(10, 0, 11, { shadow: true })).toEqual({ ...zero, totalHits: 11, nearLimit: 2, overLimit: 1, shadowMode: 1 });
    // The 21st call on a 20/minute rule.
    expect(counts(20, 20, 1, { shadow: true })).toEqual({ ...zero, totalHits: 1, overLimit: 1, shadowMode: 1 });
    // An algorithm that did not count the refused hits: all of them are over.
    expect(hitCounts({ limit: 10, used: 9, hits: 3, allowed: false, nearLimitRatio: 0.8, fromLocalCache: false, shadow: true })).toMatchObject({
      overLimit: 3,
      shadowMode: 3,
    });
    expect(hitCounts({ limit: 10, used: 0, hits: 3, allowed: false, nearLimitRatio: 0.8, fromLocalCache: true, shadow: true })).toMatchObject({
      overLimitWithLocalCache: 3,
      shadowMode: 3,
    });
  });

  it('shadow mode counts nothing while within the limit', () => {
    expect(counts(10, 9, 1, { shadow: true })).toEqual({ ...zero, totalHits: 1, withinLimit: 1, nearLimit: 1 });
  });
});
