import { describe, expect, it } from 'vitest';
import { counterKey, policyKeys } from '../../../src/limiter/counter-key';
import { signalHash } from '../../../src/policy/signal-hash';

describe('policy keys', () => {
  it('are hash-tagged by domain and client, with request parts escaped', () => {
    expect(policyKeys('p_', 'api', 'remote_address', '10.0.0.1')).toEqual([
      'p_rl:{api:remote_address=10.0.0.1}:policy:state',
      'p_rl:{api:remote_address=10.0.0.1}:policy:routes',
      'p_rl:{api:remote_address=10.0.0.1}:policy:prints',
    ]);
    expect(policyKeys('', 'a:b', 'k', 'x}{y=z')[0]).toBe('rl:{a%3Ab:k=x%7D%7By%3Dz}:policy:state');
  });

  it('never equal a counter key of the same tag', () => {
    const counter = counterKey(
      '',
      { domain: 'api', entries: [{ key: 'remote_address', value: '1' }] },
      { algorithm: 'fixed_window', limit: 1, windowSeconds: 60, burst: 1 },
    );
    expect(policyKeys('', 'api', 'remote_address', '1')).not.toContain(counter);
    expect(counter.split('}')[0]).toBe(policyKeys('', 'api', 'remote_address', '1')[0].split('}')[0]);
  });
});

describe('signal hash', () => {
  it('is 1..2^31-1 (an intset of 32-bit members in Redis), never 0, and stable', () => {
    expect(signalHash('')).toBe(0x811c9dc5 >>> 1);
    expect(signalHash('/a')).toBe(signalHash('/a'));
    expect(signalHash('/a')).not.toBe(signalHash('/b'));
    for (const v of ['', 'x', '/login', '\uD800']) {
      expect(signalHash(v)).toBeGreaterThanOrEqual(1);
      expect(signalHash(v)).toBeLessThanOrEqual(2 ** 31 - 1);
    }
  });
});
