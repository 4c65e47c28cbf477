import { InvalidRequestError } from '../base/errors';
import type { RateLimitRequest, RequestDescriptor } from '../service/types';
import type { Unit } from '../domain/units';
import type { WireDescriptor, WireRequest } from './wire-types';

// RateLimitUnit on the request side: its names, and the number 7, which the request's enum does
// not name but the reference enforces as WEEK (its response enum's 7). The name WEEK is not the
// request enum's, so protobuf JSON refuses it; UNKNOWN and other numbers crash the reference.
const OVERRIDE_UNITS: ReadonlyMap<string | number, Unit> = new Map<string | number, Unit>([
  ['SECOND', 'SECOND'],
  ['MINUTE', 'MINUTE'],
  ['HOUR', 'HOUR'],
  ['DAY', 'DAY'],
  ['MONTH', 'MONTH'],
  ['YEAR', 'YEAR'],
  [7, 'WEEK'],
]);

/** The largest uint64, the range of a descriptor's hits_addend (google.protobuf.UInt64Value). */
const UINT64_MAX = BigInt('18446744073709551615');

/**
 * A descriptor's hits_addend from the wire (a decimal string on the server, exact for any
 * uint64), as a number (exact up to 2^53); 0 = check only. Any uint64 is taken, as the reference
 * counts any (issue 27); only what is no uint64 is refused, with the digits the caller sent.
 */
function hitsFromWire(raw: number | string, what: string): number {
  const text = String(raw);
  if (!/^\d{1,20}$/.test(text) || BigInt(text) > UINT64_MAX) {
    throw new InvalidRequestError(`${what} ${text} is out of range (0 to ${UINT64_MAX})`);
  }
  return Number(text);
}

function descriptorFromWire(d: WireDescriptor, index: number): RequestDescriptor {
  let descriptor: RequestDescriptor = { entries: d.entries ?? [] };
  if (d.limit) {
    const unit = OVERRIDE_UNITS.get(d.limit.unit);
    if (unit === undefined) {
      throw new InvalidRequestError(`descriptor ${index}: limit override has invalid unit '${String(d.limit.unit)}'`);
    }
    descriptor = { ...descriptor, limit: { requestsPerUnit: d.limit.requests_per_unit, unit } };
  }
  if (d.hits_addend) {
    descriptor = { ...descriptor, hitsAddend: hitsFromWire(d.hits_addend.value, `descriptor ${index}: hits_addend`) };
  }
  return descriptor;
}

/** Wire request → domain request. The wire's hits_addend 0 means "not set" and becomes 1. */
export function requestFromWire(wire: WireRequest): RateLimitRequest {
  const descriptors = wire.descriptors ?? [];
  return {
    domain: wire.domain ?? '',
    descriptors: descriptors.map(descriptorFromWire),
    hitsAddend: wire.hits_addend || 1,
    hitsAddendAsSent: wire.hits_addend ?? 0,
  };
}
