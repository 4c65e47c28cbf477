import { InvalidRequestError } from '../errors';
import type { RateLimitRequest, RateLimitResponse, RequestDescriptor } from '../service/types';
import { UINT32_MAX } from '../domain/uint32';
import type { Unit } from '../domain/units';
import type { WireDescriptor, WireDescriptorStatus, WireRequest, WireResponse, WireStruct, WireValue } from './wire-types';

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

function valueToWire(v: unknown): WireValue {
  if (v === null || v === undefined) return { nullValue: 'NULL_VALUE' };
  if (typeof v === 'number') return { numberValue: v };
  if (typeof v === 'string') return { stringValue: v };
  if (typeof v === 'boolean') return { boolValue: v };
  if (Array.isArray(v)) return { listValue: { values: v.map(valueToWire) } };
  if (typeof v === 'object') return { structValue: structToWire(v as Record<string, unknown>) };
  // What is left has no JSON form: a bigint (a YAML integer past 2^53), a symbol or a function.
  return { stringValue: typeof v === 'function' ? Function.prototype.toString.call(v) : (v as bigint | symbol).toString() };
}

/** Plain JSON object → google.protobuf.Struct in proto-loader's camelCase oneof form. */
export function structToWire(obj: Readonly<Record<string, unknown>>): WireStruct {
  const fields: Record<string, WireValue> = {};
  for (const [k, v] of Object.entries(obj)) fields[k] = valueToWire(v);
  return { fields };
}

/** Domain response → wire response. */
export function responseToWire(response: RateLimitResponse): WireResponse {
  const statuses: WireDescriptorStatus[] = response.statuses.map((s) => {
    const out: WireDescriptorStatus = { code: s.code, limit_remaining: s.limitRemaining };
    if (s.currentLimit !== undefined) {
      out.current_limit = { name: s.currentLimit.name ?? '', requests_per_unit: s.currentLimit.requestsPerUnit, unit: s.currentLimit.unit };
      out.duration_until_reset = { seconds: s.durationUntilResetSeconds, nanos: 0 };
    }
    return out;
  });
  const wire: WireResponse = {
    overall_code: response.overallCode,
    statuses,
    response_headers_to_add: response.responseHeadersToAdd as WireResponse['response_headers_to_add'],
    request_headers_to_add: response.requestHeadersToAdd as WireResponse['request_headers_to_add'],
  };
  if (response.dynamicMetadata !== undefined) wire.dynamic_metadata = structToWire(response.dynamicMetadata);
  return wire;
}
