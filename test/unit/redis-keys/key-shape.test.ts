import { describe, expect, test } from 'vitest';
import { counterKey, policyKeys } from '../../../src/limiter/counter-key';
import { counterKeyPattern, counterKeyShape, repairTtlSeconds } from '../../../src/redis-keys/key-shape';

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
