import { describe, expect, it } from 'vitest';
import { InvalidRequestError } from '../../../src/errors';
import { requestFromWire, responseToWire, structToWire } from '../../../src/rls/convert';
import type { WireDescriptor, WireRequest } from '../../../src/rls/wire-types';
import type { RateLimitResponse } from '../../../src/service/types';

function wireDescriptor(over: Partial<WireDescriptor> = {}): WireDescriptor {
  return { entries: [{ key: 'k', value: 'v' }], limit: null, hits_addend: null, ...over };
}

function wireRequest(over: Partial<WireRequest> = {}): WireRequest {
  return { domain: 'd', descriptors: [wireDescriptor()], hits_addend: 0, ...over };
}

function invalidMessage(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidRequestError);
    return (err as Error).message;
  }
  throw new Error('expected an InvalidRequestError');
}

describe('requestFromWire', () => {
  it('maps domain, entries and hits', () => {
    const request = requestFromWire(
      wireRequest({ descriptors: [wireDescriptor({ entries: [{ key: 'a', value: '1' }, { key: 'b', value: '' }] })], hits_addend: 3 }),
    );
    expect(request).toEqual({ domain: 'd', descriptors: [{ entries: [{ key: 'a', value: '1' }, { key: 'b', value: '' }] }], hitsAddend: 3, hitsAddendAsSent: 3 });
  });

  it('reads the wire hits_addend 0 ("not set") as 1', () => {
    expect(requestFromWire(wireRequest({ hits_addend: 0 })).hitsAddend).toBe(1);
    // As sent, for dynamic metadata (which reports hitsAddend only when it is not 0).
    expect(requestFromWire(wireRequest({ hits_addend: 0 })).hitsAddendAsSent).toBe(0);
    expect(requestFromWire(wireRequest({ hits_addend: 1 })).hitsAddendAsSent).toBe(1);
  });

  it('keeps a per-descriptor hits_addend that is present, 0 included', () => {
    const request = requestFromWire(
      wireRequest({
        descriptors: [wireDescriptor({ hits_addend: { value: 0 } }), wireDescriptor({ hits_addend: { value: 7 } }), wireDescriptor()],
        hits_addend: 2,
      }),
    );
    expect(request.descriptors.map((d) => d.hitsAddend)).toEqual([0, 7, undefined]);
    expect(request.descriptors[2]).not.toHaveProperty('hitsAddend');
    expect(request.hitsAddend).toBe(2);
  });

  it('rejects a per-descriptor hits_addend above uint32', () => {
    expect(invalidMessage(() => requestFromWire(wireRequest({ descriptors: [wireDescriptor({ hits_addend: { value: 2 ** 32 } })] })))).toMatch(
      /descriptor 0: hits_addend 4294967296 is out of range/,
    );
  });

  it('accepts a descriptor with zero entries', () => {
    expect(requestFromWire(wireRequest({ descriptors: [wireDescriptor({ entries: [] })] })).descriptors).toEqual([{ entries: [] }]);
  });

  it('fills missing fields with defaults', () => {
    expect(requestFromWire({} as WireRequest)).toEqual({ domain: '', descriptors: [], hitsAddend: 1, hitsAddendAsSent: 0 });
  });

  it.each(['SECOND', 'MINUTE', 'HOUR', 'DAY', 'MONTH', 'YEAR'] as const)('takes a limit override in %s', (unit) => {
    const request = requestFromWire(wireRequest({ descriptors: [wireDescriptor({ limit: { requests_per_unit: 42, unit } })] }));
    expect(request.descriptors[0]?.limit).toEqual({ requestsPerUnit: 42, unit });
  });

  it.each<[string | number, string]>([
    ['UNKNOWN', `descriptor 1: limit override has invalid unit 'UNKNOWN'`],
    [99, `descriptor 1: limit override has invalid unit '99'`],
    [-1, `descriptor 1: limit override has invalid unit '-1'`],
    ['WEEK', `descriptor 1: limit override has invalid unit 'WEEK'`],
  ])('rejects an override unit %j with a message', (unit, message) => {
    const descriptors = [wireDescriptor(), wireDescriptor({ limit: { requests_per_unit: 1, unit: unit as 'SECOND' } })];
    expect(invalidMessage(() => requestFromWire(wireRequest({ descriptors })))).toBe(message);
  });
});

const BASE: RateLimitResponse = { overallCode: 'OK', statuses: [], responseHeadersToAdd: [], requestHeadersToAdd: [] };

describe('responseToWire', () => {
  it('writes current_limit and duration_until_reset only for a status with a limit', () => {
    const wire = responseToWire({
      ...BASE,
      overallCode: 'OVER_LIMIT',
      statuses: [
        { code: 'OK', limitRemaining: 0, durationUntilResetSeconds: 0 },
        { code: 'OVER_LIMIT', currentLimit: { name: 'per-user', requestsPerUnit: 10, unit: 'WEEK' }, limitRemaining: 0, durationUntilResetSeconds: 17 },
        { code: 'OK', currentLimit: { requestsPerUnit: 5, unit: 'MINUTE' }, limitRemaining: 4, durationUntilResetSeconds: 1 },
        { code: 'OK', limitRemaining: 4294967295, durationUntilResetSeconds: 0 },
      ],
    });
    expect(wire.overall_code).toBe('OVER_LIMIT');
    expect(wire.statuses).toEqual([
      { code: 'OK', limit_remaining: 0 },
      {
        code: 'OVER_LIMIT',
        current_limit: { name: 'per-user', requests_per_unit: 10, unit: 'WEEK' },
        limit_remaining: 0,
        duration_until_reset: { seconds: 17, nanos: 0 },
      },
      {
        code: 'OK',
        current_limit: { name: '', requests_per_unit: 5, unit: 'MINUTE' },
        limit_remaining: 4,
        duration_until_reset: { seconds: 1, nanos: 0 },
      },
      { code: 'OK', limit_remaining: 4294967295 },
    ]);
    expect(wire.statuses[0]).not.toHaveProperty('current_limit');
    expect(wire.statuses[0]).not.toHaveProperty('duration_until_reset');
  });

  it('passes headers through and leaves dynamic_metadata out when there is none', () => {
    const wire = responseToWire({
      ...BASE,
      responseHeadersToAdd: [{ key: 'RateLimit-Limit', value: '5' }],
      requestHeadersToAdd: [{ key: 'x-rl', value: '1' }],
    });
    expect(wire.response_headers_to_add).toEqual([{ key: 'RateLimit-Limit', value: '5' }]);
    expect(wire.request_headers_to_add).toEqual([{ key: 'x-rl', value: '1' }]);
    expect(wire).not.toHaveProperty('dynamic_metadata');
  });

  it('writes dynamic metadata as a Struct in camelCase oneof form', () => {
    const wire = responseToWire({
      ...BASE,
      dynamicMetadata: {
        domain: 'd',
        hitsAddend: 3,
        shadow: false,
        nothing: null,
        descriptors: [{ entries: ['k=v'] }],
        metadata: { team: 'a', weights: [1, 'x', true] },
      },
    });
    expect(wire.dynamic_metadata).toEqual({
      fields: {
        domain: { stringValue: 'd' },
        hitsAddend: { numberValue: 3 },
        shadow: { boolValue: false },
        nothing: { nullValue: 'NULL_VALUE' },
        descriptors: {
          listValue: { values: [{ structValue: { fields: { entries: { listValue: { values: [{ stringValue: 'k=v' }] } } } } }] },
        },
        metadata: {
          structValue: {
            fields: {
              team: { stringValue: 'a' },
              weights: { listValue: { values: [{ numberValue: 1 }, { stringValue: 'x' }, { boolValue: true }] } },
            },
          },
        },
      },
    });
  });

  it('never writes snake_case Value keys (proto-loader would drop them)', () => {
    const text = JSON.stringify(structToWire({ a: 'x', b: 1, c: true, d: null, e: {}, f: [] }));
    expect(text).not.toMatch(/string_value|number_value|bool_value|null_value|struct_value|list_value/);
  });
});
