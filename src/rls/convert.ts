import { InvalidRequestError } from '../errors';
import type { RateLimitRequest, RequestDescriptor } from '../service/types';
import { UINT32_MAX } from '../domain/uint32';
import type { Unit } from '../domain/units';
import type { WireDescriptor, WireRequest } from './wire-types';

// RateLimitUnit on the request side has no WEEK; UNKNOWN or a number outside the enum is invalid.
const OVERRIDE_UNITS: ReadonlySet<string> = new Set(['SECOND', 'MINUTE', 'HOUR', 'DAY', 'MONTH', 'YEAR']);

/**
 * A hits_addend from the wire (a decimal string on the server, exact for any uint64); 0 = not set.
 * An out-of-range value is refused with the digits the caller sent.
 */
function hitsFromWire(raw: number | string, what: string): number {
  const text = String(raw);
  if (!/^\d{1,10}$/.test(text) || Number(text) > UINT32_MAX) {
    throw new InvalidRequestError(`${what} ${text} is out of range (0 to ${UINT32_MAX})`);
  }
  return Number(text);
}

function descriptorFromWire(d: WireDescriptor, index: number): RequestDescriptor {
  let descriptor: RequestDescriptor = { entries: d.entries ?? [] };
  if (d.limit) {
    const unit = d.limit.unit;
    if (typeof unit !== 'string' || !OVERRIDE_UNITS.has(unit)) {
      throw new InvalidRequestError(`descriptor ${index}: limit override has invalid unit '${String(unit)}'`);
    }
    descriptor = { ...descriptor, limit: { requestsPerUnit: d.limit.requests_per_unit, unit: unit as Unit } };
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
