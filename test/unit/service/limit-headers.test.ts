import { describe, expect, it } from 'vitest';
import { limitHeaders, type HeaderNames } from '../../../src/service/limit-headers';
import type { DescriptorStatus } from '../../../src/service/types';

const NAMES: HeaderNames = { limit: 'RateLimit-Limit', remaining: 'RateLimit-Remaining', reset: 'RateLimit-Reset' };

function limited(
  requestsPerUnit: number,
  limitRemaining: number,
  durationUntilResetSeconds: number,
  code: 'OK' | 'OVER_LIMIT' = 'OK',
): DescriptorStatus {
  return { code, currentLimit: { requestsPerUnit, unit: 'MINUTE' }, limitRemaining, durationUntilResetSeconds };
}

const NO_LIMIT: DescriptorStatus = { code: 'OK', limitRemaining: 0, durationUntilResetSeconds: 0 };
const UNLIMITED: DescriptorStatus = { code: 'OK', limitRemaining: 4294967295, durationUntilResetSeconds: 0 };

/** The header input for statuses of non-quota rules (quota flags given separately where it matters). */
function on(statuses: DescriptorStatus[], overall: 'OK' | 'OVER_LIMIT', retryAfterMs: number, quota: boolean[] = statuses.map(() => false)) {
  return { statuses, quota, overall, retryAfterMs };
}

function asMap(headers: readonly { key: string; value: string }[]): Record<string, string> {
  return Object.fromEntries(headers.map((h) => [h.key, h.value]));
}

describe('limitHeaders', () => {
  it('writes limit, remaining and reset of a single status as plain integers', () => {
    const headers = limitHeaders(NAMES, on([limited(5, 3, 42)], 'OK', 0));
    expect(headers).toEqual([
      { key: 'RateLimit-Limit', value: '5' },
      { key: 'RateLimit-Remaining', value: '3' },
      { key: 'RateLimit-Reset', value: '42' },
    ]);
  });

  it('picks the status with a limit and the smallest remaining', () => {
    const headers = asMap(limitHeaders(NAMES, on([limited(100, 80, 3000), limited(10, 2, 30), limited(50, 7, 60)], 'OK', 0)));
    expect(headers).toEqual({ 'RateLimit-Limit': '10', 'RateLimit-Remaining': '2', 'RateLimit-Reset': '30' });
  });

  it('keeps the first of equal remainders', () => {
    expect(asMap(limitHeaders(NAMES, on([limited(10, 4, 1), limited(20, 4, 2)], 'OK', 0)))['RateLimit-Limit']).toBe('10');
  });

  it('ignores statuses without a current limit (no rule, unlimited)', () => {
    const headers = asMap(limitHeaders(NAMES, on([NO_LIMIT, limited(10, 9, 12), UNLIMITED], 'OK', 0)));
    expect(headers).toEqual({ 'RateLimit-Limit': '10', 'RateLimit-Remaining': '9', 'RateLimit-Reset': '12' });
  });

  it('writes nothing when no status has a limit', () => {
    expect(limitHeaders(NAMES, on([NO_LIMIT, UNLIMITED], 'OK', 0))).toEqual([]);
  });

  it('lets an over-limit status win over an OK one with a smaller remaining', () => {
    // An OK shadow-mode status can say remaining 0 too; the one that actually limits wins.
    const statuses = [limited(5, 0, 10), limited(100, 0, 3000, 'OVER_LIMIT'), limited(7, 1, 20)];
    const headers = asMap(limitHeaders(NAMES, on(statuses, 'OVER_LIMIT', 3_000_000)));
    expect(headers['RateLimit-Limit']).toBe('100');
    expect(headers['RateLimit-Reset']).toBe('3000');
  });

  it('keeps an over-limit status once chosen, even when a later OK one has a smaller remaining', () => {
    const statuses = [limited(100, 0, 3000, 'OVER_LIMIT'), limited(5, 0, 10)];
    expect(asMap(limitHeaders(NAMES, on(statuses, 'OVER_LIMIT', 1000)))['RateLimit-Limit']).toBe('100');
  });

  it('[1/min over, 0/day over] describes the last over-limit status: the day', () => {
    const minute = limited(1, 0, 42, 'OVER_LIMIT');
    const day: DescriptorStatus = {
      code: 'OVER_LIMIT',
      currentLimit: { requestsPerUnit: 0, unit: 'DAY' },
      limitRemaining: 0,
      durationUntilResetSeconds: 40_000,
    };
    const headers = asMap(limitHeaders(NAMES, on([minute, day], 'OVER_LIMIT', 40_000_000)));
    expect(headers).toMatchObject({ 'RateLimit-Limit': '0', 'RateLimit-Remaining': '0', 'RateLimit-Reset': '40000' });
  });

  it('an over-limit quota status does not override the choice; it takes part by its remaining only', () => {
    const within = limited(10, 2, 5);
    const quotaOver = limited(3, 0, 7, 'OVER_LIMIT');
    // Smallest remaining: the quota status is chosen like any other.
    expect(asMap(limitHeaders(NAMES, on([within, quotaOver], 'OK', 0, [false, true])))['RateLimit-Limit']).toBe('3');
    // A non-quota over-limit status chosen before it stays chosen.
    const over = limited(100, 0, 9, 'OVER_LIMIT');
    expect(asMap(limitHeaders(NAMES, on([over, quotaOver], 'OVER_LIMIT', 9000, [false, true])))['RateLimit-Limit']).toBe('100');
    // As a non-quota status it overrides.
    expect(asMap(limitHeaders(NAMES, on([over, quotaOver], 'OVER_LIMIT', 9000, [false, false])))['RateLimit-Limit']).toBe('3');
  });

  it('uses the configured header names', () => {
    const names = { limit: 'X-RateLimit-Limit', remaining: 'X-RateLimit-Remaining', reset: 'X-RateLimit-Reset' };
    expect(limitHeaders(names, on([limited(5, 4, 60)], 'OK', 0)).map((h) => h.key)).toEqual([
      'X-RateLimit-Limit',
      'X-RateLimit-Remaining',
      'X-RateLimit-Reset',
    ]);
  });
});

describe('Retry-After', () => {
  it('is absent when the overall code is OK', () => {
    const headers = limitHeaders(NAMES, on([limited(5, 0, 10, 'OVER_LIMIT')], 'OK', 9000));
    expect(headers.some((h) => h.key === 'Retry-After')).toBe(false);
  });

  it.each<[number, string]>([
    [1, '1'],
    [999, '1'],
    [1000, '1'],
    [1001, '2'],
    [59_200, '60'],
    [0, '1'],
  ])('is ceil(%d ms) in whole seconds, at least 1: %s', (ms, value) => {
    const headers = asMap(limitHeaders(NAMES, on([limited(5, 0, 60, 'OVER_LIMIT')], 'OVER_LIMIT', ms)));
    expect(headers['Retry-After']).toBe(value);
  });

  it('comes after the limit headers and is sent even without a status with a limit', () => {
    expect(limitHeaders(NAMES, on([limited(5, 0, 60, 'OVER_LIMIT')], 'OVER_LIMIT', 2500)).map((h) => h.key)).toEqual([
      'RateLimit-Limit',
      'RateLimit-Remaining',
      'RateLimit-Reset',
      'Retry-After',
    ]);
    expect(limitHeaders(NAMES, on([NO_LIMIT], 'OVER_LIMIT', 2500))).toEqual([{ key: 'Retry-After', value: '3' }]);
  });
});
