import { describe, expect, test } from 'vitest';
import { counterKey, policyKeys } from '../../../src/limiter/counter-key';
import { referenceWindowKey } from '../../../src/limiter/reference-key';
import {
  counterKeyPattern,
  counterKeyShape,
  referenceKeyShape,
  type ReferenceDomains,
  repairReferenceTtlSeconds,
  repairTtlSeconds,
} from '../../../src/redis-keys/key-shape';

describe('counterKeyShape', () => {
  test('every key the limiter builds is of known shape with its algorithm type', () => {
    const cases = [
      ['fixed_window', 'string'],
      ['gcra', 'string'],
      ['sliding_window', 'hash'],
      ['token_bucket', 'hash'],
      ['sliding_log', 'zset'],
    ] as const;
    for (const [algorithm, type] of cases) {
      const key = counterKey(
        'p:',
        { domain: 'd{x}', entries: [{ key: 'k', value: 'a:b=c%' }] },
        { algorithm, limit: 1, windowSeconds: 60, burst: 1 },
      );
      expect(counterKeyShape('p:', key, type)).toEqual({ algorithm, windowSeconds: 60 });
      expect(counterKeyShape('p:', key, type === 'zset' ? 'string' : 'zset')).toBeUndefined();
    }
  });

  test('every request text escapes into a known shape: empty values, newlines, lone surrogates, several entries', () => {
    const spec = { algorithm: 'gcra', limit: 1, windowSeconds: 1, burst: 1 } as const;
    for (const entries of [
      [{ key: 'k', value: '' }],
      [{ key: '', value: 'v' }],
      [{ key: 'k', value: 'a\nb%25 \uD800x\uDFFF' }],
      [
        { key: 'a', value: '1:2' },
        { key: 'b=', value: '{}' },
      ],
    ]) {
      expect(counterKeyShape('', counterKey('', { domain: 'd:\n', entries }, spec), 'string'), JSON.stringify(entries)).toEqual({
        algorithm: 'gcra',
        windowSeconds: 1,
      });
    }
  });

  test('a fixed window keeps one key per window, "<counter>:<window start, epoch s>" (issue 20)', () => {
    const key = counterKey(
      'p:',
      { domain: 'd', entries: [{ key: 'k', value: 'v' }] },
      { algorithm: 'fixed_window', limit: 1, windowSeconds: 60, burst: 1 },
    );
    for (const start of ['0', '1700000040', '999999999999']) {
      expect(counterKeyShape('p:', `${key}:${start}`, 'string'), start).toEqual({ algorithm: 'fixed_window', windowSeconds: 60 });
      expect(counterKeyShape('p:', `${key}:${start}`, 'hash'), start).toBeUndefined();
    }
    // The counter's own key, as an older floodgate kept it: a rolling upgrade may leave it behind.
    expect(counterKeyShape('p:', key, 'string')).toEqual({ algorithm: 'fixed_window', windowSeconds: 60 });
    expect(counterKeyShape('p:', 'p:rl:{shop:api_key=partner-42}:fixed_window:1:1700000040', 'string')).toEqual({
      algorithm: 'fixed_window',
      windowSeconds: 1,
    });
  });

  test('a window start is for the fixed window only, and a number of at most 12 digits', () => {
    for (const [algorithm, type] of [
      ['gcra', 'string'],
      ['sliding_window', 'hash'],
      ['token_bucket', 'hash'],
      ['sliding_log', 'zset'],
    ] as const) {
      const key = counterKey('p:', { domain: 'd', entries: [{ key: 'k', value: 'v' }] }, { algorithm, limit: 1, windowSeconds: 60, burst: 1 });
      expect(counterKeyShape('p:', key, type), algorithm).toEqual({ algorithm, windowSeconds: 60 });
      expect(counterKeyShape('p:', `${key}:1700000040`, type), algorithm).toBeUndefined();
    }
    for (const suffix of [':', ':1000000000000', ':-1', ':17e8', ':1700000040:1', ':1700000040 ']) {
      const key = `p:rl:{d:k=v}:fixed_window:60${suffix}`;
      expect(counterKeyShape('p:', key, 'string'), key).toBeUndefined();
    }
  });

  test('other keys are of unknown shape', () => {
    for (const key of [
      'p:rl:garbage',
      'p:rl:{d}:leaky:60',
      'p:rl:{d}:fixed_window:0',
      'p:rl:{d}:fixed_window:60:x',
      'q:rl:{d}:fixed_window:60',
      'p:rl:{a{b}:fixed_window:60',
      // Issue 18, finding 11: another application's keys under the same `rl:` namespace.
      'p:rl:session:alice',
      'p:rl:{session:alice}:fixed_window:60',
      'p:rl:{shop:user=a=b}:fixed_window:60',
      'p:rl:{shop:user=100%}:fixed_window:60',
      'p:rl:{:user=a}:fixed_window:60',
      'p:rl:{}:fixed_window:60',
    ]) {
      expect(counterKeyShape('p:', key, 'string'), key).toBeUndefined();
    }
  });

  test('the SCAN pattern escapes glob characters of the prefix', () => {
    expect(counterKeyPattern('a*b?[c]\\')).toBe('a\\*b\\?\\[c\\]\\\\rl:*');
    expect(counterKeyPattern('')).toBe('rl:*');
  });

  test('a repaired counter lives two windows', () => {
    expect(repairTtlSeconds({ algorithm: 'fixed_window', windowSeconds: 60 })).toBe(120);
  });
});

describe('policy keys (issue 11)', () => {
  test('the three keys of a client policy are of known shape, with their Redis types', () => {
    const [state, routes, prints] = policyKeys('p:', 'd{x}', 'api_key', 'a:b=c%');
    expect(counterKeyShape('p:', state, 'hash')).toEqual({ policyPart: 'state' });
    expect(counterKeyShape('p:', routes, 'set')).toEqual({ policyPart: 'routes' });
    expect(counterKeyShape('p:', prints, 'set')).toEqual({ policyPart: 'prints' });
    expect(counterKeyShape('p:', state, 'string')).toBeUndefined();
    expect(counterKeyShape('p:', 'p:rl:{d}:policy:other', 'set')).toBeUndefined();
  });

  test('a policy key has no window of its own: --fix gives it the TTL of unknown keys', () => {
    const [state] = policyKeys('p:', 'd', 'k', 'v');
    const shape = counterKeyShape('p:', state, 'hash');
    expect(shape).toBeDefined();
    expect(repairTtlSeconds(shape!)).toBeUndefined();
  });
});

describe("referenceKeyShape: the reference's keys, of the shared layout (issue 30)", () => {
  test('every key referenceWindowKey builds is recognised, with the window start and the longest unit it can be', () => {
    const counter = { domain: 'shop', entries: [{ key: 'user', value: 'a_b' }] };
    const hour = referenceWindowKey('p_', counter, 3600, Date.UTC(2026, 10, 28, 20, 30));
    const at = Date.UTC(2026, 10, 28, 20, 30);
    const shop: ReferenceDomains = new Map([['shop', [3600, 86_400]]]);
    expect(referenceKeyShape('p_', hour, 'string', shop, at)).toEqual({
      windowStart: Date.UTC(2026, 10, 28, 20) / 1000,
      longestWindowSeconds: 3600,
    });
    const second = referenceWindowKey('', { domain: 'd', entries: [{ key: 'k', value: '' }] }, 1, 1_764_361_801_500);
    expect(referenceKeyShape('', second, 'string', new Map([['d', [1]]]), 1_764_361_802_000)).toEqual({
      windowStart: 1_764_361_801,
      longestWindowSeconds: 1,
    });
    // A day (the reference's days are epoch days, UTC).
    const day = referenceWindowKey('', counter, 86_400, Date.UTC(2026, 10, 28, 20));
    expect(referenceKeyShape('', day, 'string', shop, at)?.longestWindowSeconds).toBe(86_400);
  });

  test("not the reference's: another type, another prefix, no window start, too few parts, floodgate's own keys", () => {
    const at = Date.UTC(2025, 10, 28, 20, 30);
    const shop: ReferenceDomains = new Map([['shop', []]]);
    expect(referenceKeyShape('p_', 'p_shop_user_bob_1764360000', 'hash', shop, at)).toBeUndefined();
    expect(referenceKeyShape('p_', 'q_shop_user_bob_1764360000', 'string', shop, at)).toBeUndefined();
    expect(referenceKeyShape('p_', 'p_shop_user_bob_', 'string', shop, at)).toBeUndefined();
    expect(referenceKeyShape('p_', 'p_shop_1764360000', 'string', shop, at)).toBeUndefined();
    expect(referenceKeyShape('p_', 'p_session:alice', 'string', shop, at)).toBeUndefined();
    const own = counterKey(
      'p_',
      { domain: 'd', entries: [{ key: 'k', value: 'v' }] },
      { algorithm: 'fixed_window', limit: 1, windowSeconds: 60, burst: 1 },
    );
    expect(referenceKeyShape('p_', `${own}:1764360000`, 'string', shop, at)).toBeUndefined();
  });

  test("not the reference's: a domain the rules do not have, a window start ahead, over a year old, or of no unit of the domain", () => {
    const nowMs = Date.UTC(2026, 10, 28, 20, 30);
    const hourStart = Date.UTC(2026, 10, 28, 20) / 1000;
    const shop: ReferenceDomains = new Map([['shop', [3600]]]);
    expect(referenceKeyShape('', `shop_user_bob_${hourStart}`, 'string', shop, nowMs)).toBeDefined();
    // Another application's keys, one under a name that starts like a domain.
    expect(referenceKeyShape('', 'orders_2024_11_30', 'string', shop, nowMs)).toBeUndefined();
    expect(referenceKeyShape('', `shopping_cart_x_${hourStart}`, 'string', shop, nowMs)).toBeUndefined();
    expect(referenceKeyShape('', `orders_2024_11_${hourStart}`, 'string', new Map(), nowMs)).toBeUndefined();
    // A known domain with a bogus window start.
    expect(referenceKeyShape('', `shop_user_bob_${hourStart + 7200}`, 'string', shop, nowMs)).toBeUndefined();
    expect(referenceKeyShape('', `shop_user_bob_${hourStart - 2 * 31_536_000}`, 'string', shop, nowMs)).toBeUndefined();
    expect(referenceKeyShape('', 'shop_user_bob_30', 'string', shop, nowMs)).toBeUndefined();
    expect(referenceKeyShape('', `shop_user_bob_${hourStart + 60}`, 'string', shop, nowMs)).toBeUndefined(); // a minute, not an hour
    // Domains that are prefixes of one another: each key to its own.
    const nested: ReferenceDomains = new Map([
      ['a', [3600]],
      ['a_b', [60]],
    ]);
    expect(referenceKeyShape('', `a_b_k_v_${hourStart + 60}`, 'string', nested, nowMs)).toBeDefined();
  });

  test("repairReferenceTtlSeconds: until one window of the longest unit after the key's window ends, at least 1 s", () => {
    const start = Date.UTC(2026, 10, 28, 20) / 1000;
    const shape = { windowStart: start, longestWindowSeconds: 3600 };
    expect(repairReferenceTtlSeconds(shape, start * 1000 + 600_000)).toBe(2 * 3600 - 600);
    expect(repairReferenceTtlSeconds(shape, (start + 3 * 3600) * 1000)).toBe(1);
  });
});
