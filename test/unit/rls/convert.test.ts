import { describe, expect, it } from 'vitest';
import { InvalidRequestError } from '../../../src/base/errors';
import { requestFromWire } from '../../../src/rls/convert';
import type { WireDescriptor, WireRequest } from '../../../src/rls/wire-types';

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
      wireRequest({
        descriptors: [
          wireDescriptor({
            entries: [
              { key: 'a', value: '1' },
              { key: 'b', value: '' },
            ],
          }),
        ],
        hits_addend: 3,
      }),
    );
    expect(request).toEqual({
      domain: 'd',
      descriptors: [
        {
          entries: [
            { key: 'a', value: '1' },
            { key: 'b', value: '' },
          ],
        },
      ],
      hitsAddend: 3,
      hitsAddendAsSent: 3,
    });
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

  // Issue 27: the field is a UInt64Value, and the reference counts any value of it.
  it('takes a per-descriptor hits_addend above uint32, up to 2^64 - 1', () => {
    const hitsOf = (value: number | string) =>
      requestFromWire(wireRequest({ descriptors: [wireDescriptor({ hits_addend: { value } })] })).descriptors[0]?.hitsAddend;
    expect(hitsOf(2 ** 32)).toBe(4_294_967_296);
    expect(hitsOf('4294967296')).toBe(4_294_967_296);
    expect(hitsOf('18446744073709551615')).toBe(2 ** 64);
  });

  it('rejects a per-descriptor hits_addend that is no uint64', () => {
    expect(
      invalidMessage(() => requestFromWire(wireRequest({ descriptors: [wireDescriptor({ hits_addend: { value: '18446744073709551616' } })] }))),
    ).toMatch(/descriptor 0: hits_addend 18446744073709551616 is out of range \(0 to 18446744073709551615\)/);
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
