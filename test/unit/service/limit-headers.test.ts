import { describe, expect, it } from 'vitest';
import { limitHeaders, type HeaderNames } from '../../../src/service/limit-headers';
import type { DescriptorStatus } from '../../../src/service/types';

const NAMES: HeaderNames = { limit: 'RateLimit-Limit', remaining: 'RateLimit-Remaining', reset: 'RateLimit-Reset' };

function limited(requestsPerUnit: number, limitRemaining: number, durationUntilResetSeconds: number, code: 'OK' | 'OVER_LIMIT' = 'OK'): DescriptorStatus {
  return { code, currentLimit: { requestsPerUnit, unit: 'MINUTE' }, limitRemaining, durationUntilResetSeconds };
}

const NO_LIMIT: DescriptorStatus = { code: 'OK', limitRemaining: 0, durationUntilResetSeconds: 0 };
const UNLIMITED: DescriptorStatus = { code: 'OK', limitRemaining: 4294967295, durationUntilResetSeconds: 0 };

function asMap(headers: readonly { key: string; value: string }[]): Record<string, string> {
  return Object.fromEntries(headers.map((h) => [h.key, h.value]));
}

describe('limitHeaders', () => {
  it('writes limit, remaining and reset of a single status as plain integers', () => {
    const headers = limitHeaders(NAMES, [limited(5, 3, 42)], 'OK', 0);
    expect(headers).toEqual([
      { key: 'RateLimit-Limit', value: '5' },
      { key: 'RateLimit-Remaining', value: '3' },
      { key: 'RateLimit-Reset', value: '42' },
    ]);
  });

  it('picks the status with a limit and the smallest remaining', () => {
    const headers = asMap(limitHeaders(NAMES, [limited(100, 80, 3000), limited(10, 2, 30), limited(50, 7, 60)], 'OK', 0));
    expect(headers).toEqual({ 'RateLimit-Limit': '10', 'RateLimit-Remaining': '2', 'RateLimit-Reset': '30' });
  });

  it('keeps the first of equal remainders', () => {
    expect(asMap(limitHeaders(NAMES, [limited(10, 4, 1), limited(20, 4, 2)], 'OK', 0))['RateLimit-Limit']).toBe('10');
  });

  it('ignores statuses without a current limit (no rule, unlimited)', () => {
    const headers = asMap(limitHeaders(NAMES, [NO_LIMIT, limited(10, 9, 12), UNLIMITED], 'OK', 0));
    expect(headers).toEqual({ 'RateLimit-Limit': '10', 'RateLimit-Remaining': '9', 'RateLimit-Reset': '12' });
  });

  it('writes nothing when no status has a limit', () => {
    expect(limitHeaders(NAMES, [NO_LIMIT, UNLIMITED], 'OK', 0)).toEqual([]);
  });

  it('lets an over-limit status win over an OK one with a smaller remaining', () => {
    // An OK shadow-mode status can say remaining 0 too; the one that actually limits wins.
    const statuses = [limited(5, 0, 10), limited(100, 0, 3000, 'OVER_LIMIT'), limited(7, 1, 20)];
    const headers = asMap(limitHeaders(NAMES, statuses, 'OVER_LIMIT', 3_000_000));
    expect(headers['RateLimit-Limit']).toBe('100');
    expect(headers['RateLimit-Reset']).toBe('3000');
  });

  it('keeps an over-limit status once chosen, even when a later OK one has a smaller remaining', () => {
    const statuses = [limited(100, 0, 3000, 'OVER_LIMIT'), limited(5, 0, 10)];
    expect(asMap(limitHeaders(NAMES, statuses, 'OVER_LIMIT', 1000))['RateLimit-Limit']).toBe('100');
  });

  it('uses the configured header names', () => {
    const names = { limit: 'X-RateLimit-Limit', remaining: 'X-RateLimit-Remaining', reset: 'X-RateLimit-Reset' };
    expect(limitHeaders(names, [limited(5, 4, 60)], 'OK', 0).map((h) => h.key)).toEqual([
      'X-RateLimit-Limit',
      'X-RateLimit-Remaining',
      'X-RateLimit-Reset',
    ]);
  });
});

describe('Retry-After', () => {
  it('is absent when the overall code is OK', () => {
    const headers = limitHeaders(NAMES, [limited(5, 0, 10, 'OVER_LIMIT')], 'OK', 9000);
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
    const headers = asMap(limitHeaders(NAMES, [limited(5, 0, 60, 'OVER_LIMIT')], 'OVER_LIMIT', ms));
    expect(headers['Retry-After']).toBe(value);
  });

  it('comes after the limit headers and is sent even without a status with a limit', () => {
    expect(limitHeaders(NAMES, [limited(5, 0, 60, 'OVER_LIMIT')], 'OVER_LIMIT', 2500).map((h) => h.key)).toEqual([
      'RateLimit-Limit',
      'RateLimit-Remaining',
      'RateLimit-Reset',
      'Retry-After',
    ]);
    expect(limitHeaders(NAMES, [NO_LIMIT], 'OVER_LIMIT', 2500)).toEqual([{ key: 'Retry-After', value: '3' }]);
  });
});
