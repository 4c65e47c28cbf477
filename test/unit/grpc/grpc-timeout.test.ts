import { describe, expect, it } from 'vitest';
import { grpcJsTimeoutMs, grpcTimeoutMs } from '../../../src/grpc/grpc-timeout';

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

// grpc-js' server (server-interceptors.js handleTimeoutHeader), as it reads the header.
function byGrpcJs(header: string): number | undefined {
  const m = /(\d{1,8})\s*([HMSmun])/.exec(header);
  return m ? (Number(m[1]) * UNIT_MS[m[2]!]!) | 0 : undefined;
}

describe('grpcJsTimeoutMs', () => {
  it('reads what grpc-js reads: the first timeout anywhere in the header', () => {
    expect(grpcJsTimeoutMs('20m')).toBe(20);
    expect(grpcJsTimeoutMs('5 S')).toBe(5000);
    expect(grpcJsTimeoutMs('5S, 6S')).toBe(5000);
    expect(grpcJsTimeoutMs('123456789m')).toBe(23_456_789);
    expect(grpcJsTimeoutMs('x1Sy')).toBe(1000);
    expect(grpcJsTimeoutMs('19999870u')).toBe(19_999);
    expect(grpcJsTimeoutMs(['2S', '3S'])).toBe(2000);
  });

  it('wraps past 2^31-1 ms as grpc-js does (| 0): never a value setTimeout refuses', () => {
    expect(grpcJsTimeoutMs('700H')).toBe((700 * 3_600_000) | 0);
    expect(grpcJsTimeoutMs('700H')).toBeLessThan(0);
    expect(grpcJsTimeoutMs('1200H')).toBe(25_032_704);
    expect(grpcJsTimeoutMs('99999999H')).toBeLessThanOrEqual(2 ** 31 - 1);
  });

  it('says invalid when nothing reads as a timeout, absent when grpc-js drops the header', () => {
    for (const bad of ['', 'soon', '1x', 'm', '-', '1.S']) expect(grpcJsTimeoutMs(bad), bad).toBe('invalid');
    expect(grpcJsTimeoutMs(undefined)).toBe('absent');
    expect(grpcJsTimeoutMs('5S\u00e9')).toBe('absent');
    expect(grpcJsTimeoutMs('5S\t')).toBe('absent');
  });

  it('agrees with grpc-js on 20,000 random headers', () => {
    const alphabet = '0123456789HMSmun x-/.:,';
    let seed = 7;
    const random = (n: number): number => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    for (let i = 0; i < 20_000; i++) {
      let header = '';
      const length = random(14);
      for (let j = 0; j < length; j++) header += alphabet[random(alphabet.length)];
      expect(grpcJsTimeoutMs(header), header).toBe(byGrpcJs(header) ?? 'invalid');
    }
  });
});
