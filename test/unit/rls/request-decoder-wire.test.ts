// decodeRateLimitRequest on hand-written wire bytes whose meaning protobuf-go (the decoder of the
// reference, envoyproxy/ratelimit) settles: invalid UTF-8 in a string field, a message field
// written twice (merged), tags and varints that do not fit. protobuf-go is the judge; each
// expectation below is what `proto.Unmarshal` does with the same bytes, and
// test/integration/rls-codec-protobuf-go.test.ts checks the general case against protobuf-go
// itself on thousands of random messages.
import { describe, expect, it } from 'vitest';
import { InvalidRequestError } from '../../../src/base/errors';
import { decodeRateLimitRequest } from '../../../src/rls/request-decoder';
import { len, str, tag, uint, varint } from '../../helpers/protobuf-wire';

const entry = (key: number[], value: number[]): number[] => len(1, [...len(1, key), ...len(2, value)]);
const descriptor = (...fields: number[][]): number[] => len(2, fields.flat());
const request = (...fields: number[][]): Buffer => Buffer.from([...str(1, 'd'), ...fields.flat()]);
const ascii = (s: string): number[] => [...Buffer.from(s, 'latin1')];

function refusal(bytes: Buffer): string {
  try {
    decodeRateLimitRequest(bytes);
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidRequestError);
    return (err as Error).message;
  }
  throw new Error(`accepted: ${bytes.toString('hex')}`);
}

describe('invalid UTF-8 in a string field is refused (protobuf-go: "string field contains invalid UTF-8")', () => {
  // Latin-1 bytes as Envoy passes them through from a header value: J\xF6rg and J\xFCrg would
  // both read as J\uFFFDrg and share one counter.
  const invalid: [string, number[]][] = [
    ['a Latin-1 byte in a short value', [0x4a, 0xf6, 0x72, 0x67]],
    ['a Latin-1 byte in a long value', [...ascii('user-agent: J'), 0xfc, ...ascii('rg and some more text')]],
    ['a lone continuation byte', [0x61, 0x80]],
    ['a truncated sequence at the end', [0x61, 0xe2, 0x82]],
    ['an overlong encoding of NUL', [0xc0, 0x80]],
    ['an encoded UTF-16 surrogate', [0xed, 0xa0, 0x80]],
    ['a code point past U+10FFFF', [0xf4, 0x90, 0x80, 0x80]],
    ['0xFF', [0xff]],
  ];
  it.each(invalid)('%s, as a descriptor value', (_name, bytes) => {
    expect(refusal(request(descriptor(entry(ascii('user'), bytes))))).toMatch(/invalid UTF-8/);
  });
  it.each(invalid)('%s, as a descriptor key', (_name, bytes) => {
    expect(refusal(request(descriptor(entry(bytes, ascii('v')))))).toMatch(/invalid UTF-8/);
  });
  it.each(invalid)('%s, as the domain', (_name, bytes) => {
    expect(refusal(Buffer.from([...len(1, bytes), ...descriptor(entry(ascii('k'), ascii('v')))]))).toMatch(/invalid UTF-8/);
  });

  it('refuses a string that a later occurrence of the same field overwrites (protobuf-go reads each)', () => {
    expect(refusal(Buffer.from([...len(1, [0xff]), ...str(1, 'd'), ...descriptor(entry(ascii('k'), ascii('v')))]))).toMatch(/invalid UTF-8/);
  });

  it('accepts every valid sequence, U+FFFD written by the caller included', () => {
    const values = ['Jörg', 'Jürg', '\uFFFD', 'a\uFFFDb and a longer tail', '日本語のテキスト', '😀', '\u0000', '\u07ff\uffff', '\u{10FFFF}'];
    for (const value of values) {
      const decoded = decodeRateLimitRequest(request(descriptor(entry(ascii('user'), [...Buffer.from(value, 'utf8')]))));
      expect(decoded.descriptors[0]?.entries).toEqual([{ key: 'user', value }]);
    }
  });

  it('does not look into unknown fields, as protobuf-go does not', () => {
    const decoded = decodeRateLimitRequest(request(len(9, [0xff, 0xfe]), descriptor(len(9, [0xc0]), entry(ascii('k'), ascii('v')))));
    expect(decoded.descriptors).toEqual([{ entries: [{ key: 'k', value: 'v' }] }]);
  });
});

describe('a message field written twice merges, as protobuf-go merges it', () => {
  const e = entry(ascii('k'), ascii('v'));
  it('hits_addend {2} then {} stays 2', () => {
    const decoded = decodeRateLimitRequest(request(descriptor(e, len(3, uint(1, 2n)), len(3, []))));
    expect(decoded.descriptors[0]?.hitsAddend).toBe(2);
  });

  it('hits_addend {2} then {5} is 5; {2^40} then {3} is 3 (the merged value is the one checked)', () => {
    expect(decodeRateLimitRequest(request(descriptor(e, len(3, uint(1, 2n)), len(3, uint(1, 5n))))).descriptors[0]?.hitsAddend).toBe(5);
    expect(decodeRateLimitRequest(request(descriptor(e, len(3, uint(1, 2n ** 40n)), len(3, uint(1, 3n))))).descriptors[0]?.hitsAddend).toBe(3);
  });

  it('limit {7, MINUTE} then {unit: HOUR} is 7/HOUR', () => {
    const decoded = decodeRateLimitRequest(request(descriptor(e, len(2, [...uint(1, 7n), ...uint(2, 2n)]), len(2, uint(2, 3n)))));
    expect(decoded.descriptors[0]?.limit).toEqual({ requestsPerUnit: 7, unit: 'HOUR' });
  });

  it('limit {7, MINUTE} then {} stays 7/MINUTE; then {requests_per_unit: 0} is 0/MINUTE', () => {
    const first = len(2, [...uint(1, 7n), ...uint(2, 2n)]);
    expect(decodeRateLimitRequest(request(descriptor(e, first, len(2, [])))).descriptors[0]?.limit).toEqual({
      requestsPerUnit: 7,
      unit: 'MINUTE',
    });
    expect(decodeRateLimitRequest(request(descriptor(e, first, len(2, uint(1, 0n))))).descriptors[0]?.limit).toEqual({
      requestsPerUnit: 0,
      unit: 'MINUTE',
    });
  });

  it('limit {unit: MINUTE} with an entry between its two halves', () => {
    const decoded = decodeRateLimitRequest(request(descriptor(len(2, uint(1, 9n)), e, len(2, uint(2, 4n)))));
    expect(decoded.descriptors[0]).toEqual({ entries: [{ key: 'k', value: 'v' }], limit: { requestsPerUnit: 9, unit: 'DAY' } });
  });

  it('an entry written twice is two entries (repeated fields append); a key written twice keeps the last', () => {
    const decoded = decodeRateLimitRequest(request(descriptor(e, len(1, [...str(1, 'a'), ...str(1, 'b'), ...str(2, 'x')]))));
    expect(decoded.descriptors[0]?.entries).toEqual([
      { key: 'k', value: 'v' },
      { key: 'b', value: 'x' },
    ]);
  });
});

describe('tags and varints that protobuf-go refuses', () => {
  const e = entry(ascii('k'), ascii('v'));
  it('a field number past 2^29 - 1 (2^32 + 10 with the domain wire type is not the domain)', () => {
    const huge = Buffer.from([...varint(((2n ** 32n + 10n) << 3n) | 2n), 1, 0x78, ...descriptor(e)]);
    expect(refusal(huge)).toMatch(/field number/);
    expect(refusal(Buffer.from([...tag(2 ** 29, 0), 1, ...descriptor(e)]))).toMatch(/field number/);
  });

  it('a field number past 2^29 - 1 inside a descriptor, an entry, a limit and a hits_addend wrapper', () => {
    const bad = [...varint(((2n ** 32n + 1n) << 3n) | 2n), 0];
    expect(refusal(request(descriptor(e, bad)))).toMatch(/field number/);
    expect(refusal(request(descriptor(len(1, [...str(1, 'k'), ...bad]))))).toMatch(/field number/);
    expect(refusal(request(descriptor(e, len(2, [...uint(1, 1n), ...bad]))))).toMatch(/field number/);
    expect(refusal(request(descriptor(e, len(3, bad))))).toMatch(/field number/);
  });

  it('field number 0, in every message', () => {
    const zero = [0x00, 0x01];
    expect(refusal(Buffer.from([...zero, ...str(1, 'd')]))).toMatch(/field number 0/);
    expect(refusal(request(descriptor(e, zero)))).toMatch(/field number 0/);
    expect(refusal(request(descriptor(len(1, [...str(1, 'k'), ...zero]))))).toMatch(/field number 0/);
    expect(refusal(request(descriptor(e, len(2, zero))))).toMatch(/field number 0/);
    expect(refusal(request(descriptor(e, len(3, zero))))).toMatch(/field number 0/);
  });

  it('the largest field number, 2^29 - 1, is an unknown field and skipped', () => {
    const decoded = decodeRateLimitRequest(request(uint(2 ** 29 - 1, 5n), descriptor(e, uint(2 ** 29 - 1, 5n))));
    expect(decoded.descriptors).toEqual([{ entries: [{ key: 'k', value: 'v' }] }]);
  });

  // Ten bytes carry 70 bits; protobuf-go refuses the varint when the tenth byte is over 1.
  const overflow = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
  it('a 10-byte varint past 64 bits, as the top-level hits_addend, a limit, a wrapper, an unknown field', () => {
    expect(refusal(request([...tag(3, 0), ...overflow], descriptor(e)))).toMatch(/varint/);
    expect(refusal(request(descriptor(e, len(2, [...tag(1, 0), ...overflow]))))).toMatch(/varint/);
    expect(refusal(request(descriptor(e, len(2, [...tag(2, 0), ...overflow]))))).toMatch(/varint/);
    expect(refusal(request(descriptor(e, len(3, [...tag(1, 0), ...overflow]))))).toMatch(/varint/);
    expect(refusal(request([...tag(15, 0), ...overflow], descriptor(e)))).toMatch(/varint/);
    expect(refusal(request(descriptor(len(1, [...tag(7, 0), ...overflow]))))).toMatch(/varint/);
  });

  it('a 10-byte varint whose tenth byte is 1 fits 64 bits and is read', () => {
    const max = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
    const decoded = decodeRateLimitRequest(request([...tag(15, 0), ...max], descriptor(e, len(2, [...tag(1, 0), ...max, ...uint(2, 1n)]))));
    expect(decoded.descriptors[0]?.limit).toEqual({ requestsPerUnit: 4294967295, unit: 'SECOND' });
  });

  it('a tag or a length written as a 10-byte varint past 64 bits', () => {
    expect(refusal(Buffer.from(overflow))).toMatch(/varint/);
    expect(refusal(Buffer.from([...tag(1, 2), ...overflow, 0x64]))).toMatch(/varint/);
  });

  it('a length past 2^32 is not read as its low 32 bits', () => {
    // 2^32 + 1: read as 1, it would make "d" the domain.
    expect(refusal(Buffer.from([...tag(1, 2), ...varint(2n ** 32n + 1n), 0x64]))).toMatch(/length/);
  });

  it('a tag written with more bytes than needed is still the same tag', () => {
    const domain = [0x8a, 0x80, 0x80, 0x80, 0x00, 1, 0x78];
    expect(decodeRateLimitRequest(Buffer.from([...domain, ...descriptor(e)])).domain).toBe('x');
  });
});

describe('a descriptor hits_addend is a UInt64Value: any uint64 is read, none refused (issue 27)', () => {
  const e = entry(ascii('k'), ascii('v'));
  const hitsOf = (value: bigint) => decodeRateLimitRequest(request(descriptor(e, len(3, uint(1, value))))).descriptors[0]?.hitsAddend;
  it.each([
    [2n ** 32n - 1n, 4_294_967_295],
    [2n ** 32n, 4_294_967_296],
    [2n ** 40n, 2 ** 40],
    [2n ** 53n - 1n, Number.MAX_SAFE_INTEGER],
    // Past 2^53 as a double, as the reference's float64(hits) in its dynamic metadata.
    [2n ** 53n + 1n, 2 ** 53],
    [2n ** 63n, 2 ** 63],
    [2n ** 64n - 1n, 2 ** 64],
  ])('%s', (value, expected) => {
    expect(hitsOf(value)).toBe(expected);
  });
});
