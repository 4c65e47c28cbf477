import { describe, expect, it } from 'vitest';
import { InvalidRequestError } from '../../../src/base/errors';
import { requestFromWire } from '../../../src/rls/convert';
import { responseToJson, wireRequestFromJson } from '../../../src/http/json-codec';
import type { RateLimitResponse } from '../../../src/service/types';

function invalidMessage(body: string): string {
  try {
    wireRequestFromJson(body);
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidRequestError);
    return (err as Error).message;
  }
  throw new Error(`expected ${body} to be rejected`);
}

describe('wireRequestFromJson', () => {
  // Issue 27: a descriptor's hitsAddend is a UInt64Value; /json takes it up to 2^53 - 1, a JSON
  // number's exact range (docs/differences.md), as a number or a string.
  it('takes a descriptor hitsAddend above uint32, up to 2^53 - 1', () => {
    for (const hitsAddend of [4294967296, '4294967296', Number.MAX_SAFE_INTEGER]) {
      const wire = wireRequestFromJson(JSON.stringify({ domain: 'd', descriptors: [{ entries: [{ key: 'k', value: 'v' }], hitsAddend }] }));
      expect(requestFromWire(wire).descriptors[0]?.hitsAddend).toBe(Number(hitsAddend));
    }
    expect(invalidMessage('{"domain":"d","descriptors":[{"entries":[],"hitsAddend":"9007199254740992"}]}')).toMatch(
      /must be an integer from 0 to 9007199254740991/,
    );
  });

  it('reads the protobuf JSON form (camelCase)', () => {
    const wire = wireRequestFromJson(
      JSON.stringify({
        domain: 'd',
        descriptors: [
          { entries: [{ key: 'k', value: 'v' }], limit: { requestsPerUnit: 5, unit: 'MINUTE' }, hitsAddend: 0 },
          { entries: [{ key: 'k2' }] },
        ],
        hitsAddend: 2,
      }),
    );
    expect(wire).toEqual({
      domain: 'd',
      descriptors: [
        { entries: [{ key: 'k', value: 'v' }], limit: { requests_per_unit: 5, unit: 'MINUTE' }, hits_addend: { value: 0 } },
        { entries: [{ key: 'k2', value: '' }], limit: null, hits_addend: null },
      ],
      hits_addend: 2,
    });
  });

  it('reads the original snake_case names too', () => {
    const wire = wireRequestFromJson(
      '{"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v"}],"limit":{"requests_per_unit":7,"unit":"HOUR"},"hits_addend":3}],"hits_addend":4}',
    );
    expect(wire.hits_addend).toBe(4);
    expect(wire.descriptors[0]).toEqual({
      entries: [{ key: 'k', value: 'v' }],
      limit: { requests_per_unit: 7, unit: 'HOUR' },
      hits_addend: { value: 3 },
    });
  });

  it('accepts 64-bit integers written as strings, as protobuf JSON does', () => {
    const wire = wireRequestFromJson('{"domain":"d","descriptors":[{"entries":[],"hitsAddend":"5"}],"hitsAddend":"2"}');
    expect(wire.hits_addend).toBe(2);
    expect(wire.descriptors[0]?.hits_addend).toEqual({ value: 5 });
  });

  it('fills defaults for missing fields; hitsAddend 0 ends up as 1 after conversion', () => {
    const wire = wireRequestFromJson('{}');
    expect(wire).toEqual({ domain: '', descriptors: [], hits_addend: 0 });
    expect(requestFromWire(wireRequestFromJson('{"domain":"d","descriptors":[{"entries":[]}]}')).hitsAddend).toBe(1);
  });

  it('reads a limit without a unit as UNKNOWN, which conversion rejects', () => {
    const wire = wireRequestFromJson('{"domain":"d","descriptors":[{"entries":[],"limit":{"requestsPerUnit":1}}]}');
    expect(wire.descriptors[0]?.limit).toEqual({ requests_per_unit: 1, unit: 'UNKNOWN' });
    expect(() => requestFromWire(wire)).toThrow(InvalidRequestError);
  });

  it('reads an enum given by number, as protobuf JSON allows', () => {
    const wire = wireRequestFromJson('{"domain":"d","descriptors":[{"entries":[],"limit":{"requestsPerUnit":1,"unit":2}}]}');
    expect(wire.descriptors[0]?.limit?.unit).toBe('MINUTE');
    expect(requestFromWire(wire).descriptors[0]?.limit).toEqual({ requestsPerUnit: 1, unit: 'MINUTE' });
  });

  it('leaves an out-of-range enum number for conversion to reject', () => {
    const wire = wireRequestFromJson('{"domain":"d","descriptors":[{"entries":[],"limit":{"requestsPerUnit":1,"unit":99}}]}');
    expect(() => requestFromWire(wire)).toThrow(/invalid unit '99'/);
  });

  it.each<[string, string, RegExp]>([
    ['not JSON', '{"domain": ', /^request body is not valid JSON: /],
    ['an empty body', '', /^request body is not valid JSON/],
    ['a list', '[]', /^request body must be an object$/],
    ['null', 'null', /^request body must be an object$/],
    ['a string', '"d"', /^request body must be an object$/],
    ['a numeric domain', '{"domain":5}', /^domain must be a string$/],
    ['descriptors not a list', '{"domain":"d","descriptors":{}}', /^descriptors must be a list$/],
    ['a descriptor not an object', '{"domain":"d","descriptors":[1]}', /^descriptors\[0\] must be an object$/],
    ['entries not a list', '{"domain":"d","descriptors":[{"entries":"k=v"}]}', /^descriptors\[0\]\.entries must be a list$/],
    ['an entry not an object', '{"domain":"d","descriptors":[{"entries":["k"]}]}', /^descriptors\[0\]\.entries\[0\] must be an object$/],
    [
      'a numeric value',
      '{"domain":"d","descriptors":[{"entries":[{"key":"k","value":1}]}]}',
      /^descriptors\[0\]\.entries\[0\]\.value must be a string$/,
    ],
    ['a negative hitsAddend', '{"domain":"d","hitsAddend":-1}', /^hitsAddend must be/],
    ['a fractional hitsAddend', '{"domain":"d","hitsAddend":1.5}', /^hitsAddend must be/],
    ['a boolean hitsAddend', '{"domain":"d","hitsAddend":true}', /^hitsAddend must be/],
    ['a non-numeric string hitsAddend', '{"domain":"d","hitsAddend":"two"}', /^hitsAddend must be/],
    ['a hitsAddend above uint32', '{"domain":"d","hitsAddend":4294967296}', /^hitsAddend must be/],
    ['a limit that is not an object', '{"domain":"d","descriptors":[{"entries":[],"limit":5}]}', /^descriptors\[0\]\.limit must be an object$/],
    [
      'a requestsPerUnit above uint32',
      '{"domain":"d","descriptors":[{"entries":[],"limit":{"requestsPerUnit":1e10,"unit":"SECOND"}}]}',
      /^descriptors\[0\]\.limit\.requestsPerUnit must be/,
    ],
    [
      'a non-string unit',
      '{"domain":"d","descriptors":[{"entries":[],"limit":{"requestsPerUnit":1,"unit":true}}]}',
      /^descriptors\[0\]\.limit\.unit must be a string$/,
    ],
    [
      'a negative descriptor hitsAddend',
      '{"domain":"d","descriptors":[{"entries":[],"hitsAddend":-2}]}',
      /^descriptors\[0\]\.hitsAddend must be/,
    ],
    ['a misspelt request field', '{"domain":"d","hitAddend":2}', /^unknown field 'hitAddend' in request body$/],
    ['an unknown descriptor field', '{"domain":"d","descriptors":[{"entries":[],"extra":1}]}', /^unknown field 'extra' in descriptors\[0\]$/],
    [
      'an unknown entry field',
      '{"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v","type":"x"}]}]}',
      /^unknown field 'type' in descriptors\[0\]\.entries\[0\]$/,
    ],
    [
      'an unknown limit field',
      '{"domain":"d","descriptors":[{"entries":[],"limit":{"requestsPerUnit":1,"unit":"SECOND","burst":2}}]}',
      /^unknown field 'burst' in descriptors\[0\]\.limit$/,
    ],
  ])('rejects %s with InvalidRequestError', (_what, body, message) => {
    expect(invalidMessage(body)).toMatch(message);
  });
});

// The body's bytes: like protojson in the reference (400 "invalid UTF-8 in string"), invalid
// UTF-8 is refused, never read with replacement characters that would merge distinct clients
// (J\xF6rg and J\xFCrg into J\uFFFDrg). The reference's /json was asked with the same bodies.
describe('wireRequestFromJson on raw body bytes', () => {
  const body = (value: number[]): Buffer =>
    Buffer.concat([Buffer.from('{"domain":"d","descriptors":[{"entries":[{"key":"user","value":"'), Buffer.from(value), Buffer.from('"}]}]}')]);
  const refused = (bytes: Buffer): string => {
    try {
      wireRequestFromJson(bytes);
    } catch (err) {
      expect(err).toBeInstanceOf(InvalidRequestError);
      return (err as Error).message;
    }
    throw new Error(`accepted: ${bytes.toString('hex')}`);
  };

  it.each<[string, number[]]>([
    ['a Latin-1 byte', [0x4a, 0xf6, 0x72, 0x67]],
    ['another Latin-1 byte', [0x4a, 0xfc, 0x72, 0x67]],
    ['an encoded surrogate', [0xed, 0xa0, 0x80]],
    ['an overlong encoding', [0xc0, 0xaf]],
    ['a truncated sequence', [0xe2, 0x82]],
  ])('refuses %s in a value with 400', (_name, bytes) => {
    expect(refused(body(bytes))).toMatch(/^request body is not valid UTF-8/);
  });

  it('refuses invalid UTF-8 in the domain, in a key, and outside any string', () => {
    expect(refused(Buffer.from([...Buffer.from('{"domain":"'), 0xff, ...Buffer.from('"}')]))).toMatch(/not valid UTF-8/);
    expect(refused(Buffer.from([...Buffer.from('{"domain":"d","descriptors":[{"entries":[{"key":"'), 0xfe, ...Buffer.from('"}]}]}')]))).toMatch(
      /not valid UTF-8/,
    );
    expect(refused(Buffer.from([...Buffer.from('{"domain":"d"} '), 0x80]))).toMatch(/not valid UTF-8/);
  });

  it('refuses an escaped lone surrogate (protojson: "invalid escape code"), which would also merge clients', () => {
    for (const escaped of ['J\\ud800rg', 'J\\udc00rg', '\\udc00\\ud800']) {
      expect(refused(body([...Buffer.from(escaped)]))).toMatch(/lone surrogate/);
    }
    expect(invalidMessage('{"domain":"\\ud83d"}')).toMatch(/^domain .*lone surrogate/);
  });

  it('reads valid UTF-8, escaped pairs and a U+FFFD the caller wrote', () => {
    for (const value of ['Jörg', '日本', '😀', '\uFFFD']) {
      expect(wireRequestFromJson(body([...Buffer.from(value, 'utf8')])).descriptors[0]?.entries).toEqual([{ key: 'user', value }]);
    }
    expect(wireRequestFromJson(body([...Buffer.from('\\ud83d\\ude00\\ufffd')])).descriptors[0]?.entries).toEqual([
      { key: 'user', value: '😀\uFFFD' },
    ]);
  });
});

const BASE: RateLimitResponse = { overallCode: 'OK', statuses: [], responseHeadersToAdd: [], requestHeadersToAdd: [] };

describe('responseToJson', () => {
  it('writes camelCase names, enum names and Duration as "<n>s"', () => {
    const json = responseToJson({
      ...BASE,
      overallCode: 'OVER_LIMIT',
      statuses: [
        {
          code: 'OVER_LIMIT',
          currentLimit: { name: 'login', requestsPerUnit: 5, unit: 'MINUTE' },
          limitRemaining: 0,
          durationUntilResetSeconds: 17,
        },
      ],
    });
    expect(json).toEqual({
      overallCode: 'OVER_LIMIT',
      statuses: [{ code: 'OVER_LIMIT', currentLimit: { name: 'login', requestsPerUnit: 5, unit: 'MINUTE' }, durationUntilReset: '17s' }],
    });
  });

  it('omits default values: limitRemaining 0, an empty name, empty header lists, absent metadata', () => {
    const json = responseToJson({
      ...BASE,
      statuses: [
        { code: 'OK', limitRemaining: 0, durationUntilResetSeconds: 0 },
        { code: 'OK', currentLimit: { requestsPerUnit: 10, unit: 'SECOND' }, limitRemaining: 0, durationUntilResetSeconds: 1 },
      ],
    });
    expect(json).toEqual({
      overallCode: 'OK',
      statuses: [{ code: 'OK' }, { code: 'OK', currentLimit: { requestsPerUnit: 10, unit: 'SECOND' }, durationUntilReset: '1s' }],
    });
    expect(JSON.stringify(json)).not.toMatch(/limitRemaining|responseHeadersToAdd|requestHeadersToAdd|dynamicMetadata|name/);
  });

  it('omits requestsPerUnit 0 (a limit of 0) like any other default', () => {
    const json = responseToJson({
      ...BASE,
      overallCode: 'OVER_LIMIT',
      statuses: [{ code: 'OVER_LIMIT', currentLimit: { requestsPerUnit: 0, unit: 'HOUR' }, limitRemaining: 0, durationUntilResetSeconds: 60 }],
    });
    expect(json.statuses).toEqual([{ code: 'OVER_LIMIT', currentLimit: { unit: 'HOUR' }, durationUntilReset: '60s' }]);
  });

  it('writes non-default values: remaining, headers and dynamic metadata', () => {
    const json = responseToJson({
      overallCode: 'OK',
      statuses: [
        { code: 'OK', currentLimit: { requestsPerUnit: 10, unit: 'DAY' }, limitRemaining: 9, durationUntilResetSeconds: 3600 },
        { code: 'OK', limitRemaining: 4294967295, durationUntilResetSeconds: 0 },
      ],
      responseHeadersToAdd: [{ key: 'RateLimit-Limit', value: '10' }],
      requestHeadersToAdd: [{ key: 'x-a', value: 'b' }],
      dynamicMetadata: { domain: 'd', hitsAddend: 2 },
    });
    expect(json).toEqual({
      overallCode: 'OK',
      statuses: [
        { code: 'OK', currentLimit: { requestsPerUnit: 10, unit: 'DAY' }, limitRemaining: 9, durationUntilReset: '3600s' },
        { code: 'OK', limitRemaining: 4294967295 },
      ],
      responseHeadersToAdd: [{ key: 'RateLimit-Limit', value: '10' }],
      requestHeadersToAdd: [{ key: 'x-a', value: 'b' }],
      dynamicMetadata: { domain: 'd', hitsAddend: 2 },
    });
  });
});
