// The domain response in proto-loader's object form (what the server answered with before it
// had its own encoder, src/rls/response-encoder.ts). The round-trip test encodes this with
// protobufjs as the reference the encoder's bytes are compared with.
import type { RateLimitResponse } from '../../src/service/types';
import type { WireDescriptorStatus, WireResponse, WireStruct, WireValue } from '../../src/rls/wire-types';

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
