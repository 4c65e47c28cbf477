import { InvalidRequestError } from '../errors';
import type { RateLimitResponse } from '../service/types';
import type { WireDescriptor, WireRequest } from '../grpc/wire-types';

// The /json endpoint speaks protobuf's JSON mapping: camelCase names (the original snake_case
// names are accepted too, as protobuf parsers do), enums as names, Duration as "<n>s", and
// fields with default values left out of the answer.

type Json = Record<string, unknown>;

function field(obj: Json, camel: string, snake: string): unknown {
  return obj[camel] ?? obj[snake];
}

function asObject(v: unknown, what: string): Json {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new InvalidRequestError(`${what} must be an object`);
  return v as Json;
}

function asString(v: unknown, what: string): string {
  if (v === undefined || v === null) return '';
  if (typeof v !== 'string') throw new InvalidRequestError(`${what} must be a string`);
  return v;
}

function asUint(v: unknown, what: string): number {
  if (v === undefined || v === null) return 0;
  const n = typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 0) throw new InvalidRequestError(`${what} must be a non-negative integer`);
  return n;
}

function descriptorFromJson(v: unknown, i: number): WireDescriptor {
  const d = asObject(v, `descriptors[${i}]`);
  const entries = d.entries ?? [];
  if (!Array.isArray(entries)) throw new InvalidRequestError(`descriptors[${i}].entries must be a list`);
  const limit = d.limit === undefined || d.limit === null ? null : asObject(d.limit, `descriptors[${i}].limit`);
  const hits = field(d, 'hitsAddend', 'hits_addend');
  return {
    entries: entries.map((e, j) => {
      const entry = asObject(e, `descriptors[${i}].entries[${j}]`);
      return { key: asString(entry.key, `descriptors[${i}].entries[${j}].key`), value: asString(entry.value, `descriptors[${i}].entries[${j}].value`) };
    }),
    limit: limit && {
      requests_per_unit: asUint(field(limit, 'requestsPerUnit', 'requests_per_unit'), `descriptors[${i}].limit.requestsPerUnit`),
      unit: limit.unit === undefined ? 'UNKNOWN' : typeof limit.unit === 'number' ? limit.unit : (asString(limit.unit, `descriptors[${i}].limit.unit`) as 'UNKNOWN'),
    },
    hits_addend: hits === undefined || hits === null ? null : { value: asUint(hits, `descriptors[${i}].hitsAddend`) },
  };
}

/** Parses a /json body into the wire request shape; InvalidRequestError (400) when it does not parse. */
export function wireRequestFromJson(body: string): WireRequest {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch (err) {
    throw new InvalidRequestError(`request body is not valid JSON: ${(err as Error).message}`);
  }
  const obj = asObject(parsed, 'request body');
  const descriptors = obj.descriptors ?? [];
  if (!Array.isArray(descriptors)) throw new InvalidRequestError('descriptors must be a list');
  return {
    domain: asString(obj.domain, 'domain'),
    descriptors: descriptors.map(descriptorFromJson),
    hits_addend: asUint(field(obj, 'hitsAddend', 'hits_addend'), 'hitsAddend'),
  };
}

/** The response in protobuf JSON form. */
export function responseToJson(response: RateLimitResponse): Json {
  const out: Json = {
    overallCode: response.overallCode,
    statuses: response.statuses.map((s) => {
      const status: Json = { code: s.code };
      if (s.currentLimit !== undefined) {
        const limit: Json = { requestsPerUnit: s.currentLimit.requestsPerUnit, unit: s.currentLimit.unit };
        if (s.currentLimit.name) limit.name = s.currentLimit.name;
        status.currentLimit = limit;
        status.durationUntilReset = `${s.durationUntilResetSeconds}s`;
      }
      if (s.limitRemaining !== 0) status.limitRemaining = s.limitRemaining;
      return status;
    }),
  };
  if (response.responseHeadersToAdd.length > 0) out.responseHeadersToAdd = response.responseHeadersToAdd;
  if (response.requestHeadersToAdd.length > 0) out.requestHeadersToAdd = response.requestHeadersToAdd;
  if (response.dynamicMetadata !== undefined) out.dynamicMetadata = response.dynamicMetadata;
  return out;
}
