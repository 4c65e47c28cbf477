import { describe, expect, it } from 'vitest';
import { grpcTimeoutMs } from '../../../src/grpc/grpc-timeout';

// What the connection guard read before, with a regex: the hand-written reader must agree on
// every value, well-formed or not.
const UNIT_MS: Readonly<Record<string, number>> = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 0.001, n: 0.000001 };
function byRegex(header: string): number | undefined {
  const m = /^(\d{1,8})([HMSmun])$/.exec(header);
  return m ? Number(m[1]) * UNIT_MS[m[2]!]! : undefined;
}

describe('grpcTimeoutMs', () => {
  it('reads digits and a unit in milliseconds', () => {
    expect(grpcTimeoutMs('20m')).toBe(20);
    expect(grpcTimeoutMs('5S')).toBe(5000);
    expect(grpcTimeoutMs('2M')).toBe(120_000);
    expect(grpcTimeoutMs('1H')).toBe(3_600_000);
    expect(grpcTimeoutMs('19999870u')).toBeCloseTo(19_999.87, 9);
    expect(grpcTimeoutMs('99999999n')).toBeCloseTo(99.999999, 9);
    expect(grpcTimeoutMs('007S')).toBe(7000);
  });

  it('refuses what is not 1 to 8 digits and a unit', () => {
    for (const bad of ['', 'm', '123456789m', '20', '20x', '-1m', '+1m', '1.5S', ' 1S', '1S ', '١S', '20mm']) {
      expect(grpcTimeoutMs(bad), bad).toBeUndefined();
    }
    expect(grpcTimeoutMs(undefined)).toBeUndefined();
    expect(grpcTimeoutMs(['1S', '2S'])).toBeUndefined();
  });

  it('agrees with the regex it replaced on 20,000 random headers', () => {
    const alphabet = '0123456789HMSmun x-/.:';
    let seed = 42;
    const random = (n: number): number => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    for (let i = 0; i < 20_000; i++) {
      let header = '';
      const length = random(12);
      for (let j = 0; j < length; j++) header += alphabet[random(alphabet.length)];
      expect(grpcTimeoutMs(header), header).toBe(byRegex(header));
    }
  });
});
