// RESPONSE_HEADERS_STYLE formats, parsed with a real RFC 9651 structured-field parser.
import { parseList, parseItem } from 'structured-headers';
import { describe, expect, it } from 'vitest';
import { limitHeaders, type HeaderNames } from '../../../src/service/limit-headers';
import type { Code, DescriptorStatus, RateLimitRequest } from '../../../src/service/types';

const NAMES: HeaderNames = { limit: 'RateLimit-Limit', remaining: 'RateLimit-Remaining', reset: 'RateLimit-Reset' };
const REQUEST: RateLimitRequest = {
  domain: 'edge',
  descriptors: [{ entries: [{ key: 'api_key', value: 'a' }] }, { entries: [{ key: 'api_key', value: 'b' }] }],
  hitsAddend: 1,
};
const OK_STATUS: DescriptorStatus = {
  code: 'OK',
  currentLimit: { name: 'per_key', requestsPerUnit: 10, unit: 'MINUTE' },
  limitRemaining: 4,
  durationUntilResetSeconds: 42,
};
const OVER: DescriptorStatus = {
  code: 'OVER_LIMIT',
  currentLimit: { requestsPerUnit: 5, unit: 'HOUR' },
  limitRemaining: 0,
  durationUntilResetSeconds: 1800,
};

/** The headers of one response whose rules are not in quota mode. */
function headersFor(names: HeaderNames, statuses: DescriptorStatus[], overall: Code, retryAfterMs: number, request?: RateLimitRequest) {
  return limitHeaders(names, { statuses, quota: statuses.map(() => false), overall, retryAfterMs, ...(request ? { request } : {}) });
}

function header(list: readonly { key: string; value: string }[], key: string): string {
  const found = list.filter((h) => h.key === key);
  expect(found, key).toHaveLength(1);
  return found[0]!.value;
}

describe('ietf style', () => {
  it('RateLimit-Policy and RateLimit are structured lists with the draft parameters', () => {
    const headers = headersFor({ ...NAMES, style: 'ietf' }, [OK_STATUS], 'OK', 0, REQUEST);
    expect(headers.map((h) => h.key)).toEqual(['RateLimit-Policy', 'RateLimit']);
    const policy = parseList(header(headers, 'RateLimit-Policy'));
    expect(policy).toHaveLength(1);
    const [policyName, policyParams] = policy[0]!;
    expect(policyName).toBe('per_key');
    expect(policyParams.get('q')).toBe(10);
    expect(policyParams.get('qu')).toBe('requests');
    expect(policyParams.get('w')).toBe(60);
    const pk = policyParams.get('pk');
    expect(pk).toBeInstanceOf(ArrayBuffer);
    expect(Buffer.from(pk as ArrayBuffer)).toHaveLength(12);

    const limit = parseList(header(headers, 'RateLimit'));
    const [name, params] = limit[0]!;
    expect(name).toBe('per_key');
    expect(params.get('r')).toBe(4);
    expect(params.get('t')).toBe(42);
    expect(Buffer.from(params.get('pk') as ArrayBuffer).toString('base64')).toBe(Buffer.from(pk as ArrayBuffer).toString('base64'));
  });

  it('the partition key tells descriptors apart and is stable', () => {
    const pkOf = (request: RateLimitRequest) =>
      Buffer.from(
        parseList(header(headersFor({ ...NAMES, style: 'ietf' }, [OK_STATUS], 'OK', 0, request), 'RateLimit'))[0]![1].get('pk') as ArrayBuffer,
      ).toString('base64');
    const other = { ...REQUEST, descriptors: [REQUEST.descriptors[1]!] };
    expect(pkOf(REQUEST)).toBe(pkOf(REQUEST));
    expect(pkOf(REQUEST)).not.toBe(pkOf(other));
  });

  it('an unnamed rule gets a generated policy name; over the limit adds Retry-After', () => {
    const headers = headersFor({ ...NAMES, style: 'ietf' }, [OK_STATUS, OVER], 'OVER_LIMIT', 2500, REQUEST);
    const [name, params] = parseList(header(headers, 'RateLimit'))[0]!;
    expect(name).toBe('5-per-hour');
    expect(params.get('r')).toBe(0);
    expect(parseList(header(headers, 'RateLimit-Policy'))[0]![1].get('w')).toBe(3600);
    expect(parseItem(header(headers, 'Retry-After'))[0]).toBe(3);
  });

  it('a name a structured string cannot carry is escaped or replaced, never breaks the field', () => {
    const quoted: DescriptorStatus = { ...OK_STATUS, currentLimit: { name: 'a "b" \\c', requestsPerUnit: 1, unit: 'SECOND' } };
    expect(parseList(header(headersFor({ ...NAMES, style: 'ietf' }, [quoted], 'OK', 0), 'RateLimit'))[0]![0]).toBe('a "b" \\c');
    const unicode: DescriptorStatus = { ...OK_STATUS, currentLimit: { name: 'über', requestsPerUnit: 1, unit: 'SECOND' } };
    expect(parseList(header(headersFor({ ...NAMES, style: 'ietf' }, [unicode], 'OK', 0), 'RateLimit'))[0]![0]).toBe('1-per-second');
  });
});

describe('x-ratelimit style', () => {
  it('the X-RateLimit trio, each a structured integer, and Retry-After', () => {
    const headers = headersFor({ ...NAMES, style: 'x-ratelimit' }, [OVER], 'OVER_LIMIT', 1800_000, REQUEST);
    expect(headers.map((h) => h.key)).toEqual(['X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset', 'Retry-After']);
    expect(parseItem(header(headers, 'X-RateLimit-Limit'))[0]).toBe(5);
    expect(parseItem(header(headers, 'X-RateLimit-Remaining'))[0]).toBe(0);
    expect(parseItem(header(headers, 'X-RateLimit-Reset'))[0]).toBe(1800);
    expect(parseItem(header(headers, 'Retry-After'))[0]).toBe(1800);
  });
});

describe('reference style (default)', () => {
  it('unchanged: configurable names, Retry-After on OVER_LIMIT', () => {
    const headers = headersFor({ limit: 'L', remaining: 'R', reset: 'T' }, [OVER], 'OVER_LIMIT', 10, REQUEST);
    expect(headers).toEqual([
      { key: 'L', value: '5' },
      { key: 'R', value: '0' },
      { key: 'T', value: '1800' },
      { key: 'Retry-After', value: '1' },
    ]);
    expect(parseItem(header(headers, 'T'))[0]).toBe(1800);
  });
});
