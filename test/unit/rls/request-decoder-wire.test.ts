// decodeRateLimitRequest on hand-written wire bytes whose meaning protobuf-go (the decoder of the
// reference, envoyproxy/ratelimit) settles: invalid UTF-8 in a string field. protobuf-go is the
// judge; each expectation below is what `proto.Unmarshal` does with the same bytes.
import { describe, expect, it } from 'vitest';
import { InvalidRequestError } from '../../../src/errors';
import { decodeRateLimitRequest } from '../../../src/rls/request-decoder';
import { len, str } from '../../helpers/protobuf-wire';

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
