import { isUtf8 } from 'node:buffer';
import { UINT32_MAX } from '../domain/uint32';
import { InvalidRequestError } from '../base/errors';
import type { RateLimitResponse } from '../service/types';
import type { WireDescriptor, WireRequest, WireUnit } from '../rls/wire-types';

// The /json endpoint speaks protobuf's JSON mapping: camelCase names (the original snake_case
// names are accepted too, as protobuf parsers do), enums as names, Duration as "<n>s", and
// fields with default values left out of the answer. Text that is not Unicode is refused, as
// the reference's protojson refuses it: read with replacement characters, two clients' distinct
// values would become one and share a counter.

type Json = Record<string, unknown>;

function field(obj: Json, camel: string, snake: string): unknown {
  return obj[camel] ?? obj[snake];
}

// Field names each message accepts; like protobuf's JSON parser, anything else is an error
// rather than silently ignored (a misspelt `hitAddend` must not quietly count 1).
const FIELDS = {
  request: new Set(['domain', 'descriptors', 'hitsAddend', 'hits_addend']),
  descriptor: new Set(['entries', 'limit', 'hitsAddend', 'hits_addend']),
  entry: new Set(['key', 'value']),
  limit: new Set(['requestsPerUnit', 'requests_per_unit', 'unit']),
} as const;

function asObject(v: unknown, what: string, fields: ReadonlySet<string>): Json {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new InvalidRequestError(`${what} must be an object`);
  for (const name of Object.keys(v)) {
    if (!fields.has(name)) throw new InvalidRequestError(`unknown field '${name}' in ${what}`);
  }
  return v as Json;
}

function asString(v: unknown, what: string): string {
  if (v === undefined || v === null) return '';
  if (typeof v !== 'string') throw new InvalidRequestError(`${what} must be a string`);
  // JSON's \uD800-style escapes can spell a lone surrogate, which UTF-8 cannot carry.
  if (!v.isWellFormed()) throw new InvalidRequestError(`${what} contains a lone surrogate (an unpaired \\u escape)`);
  return v;
}

function asUint(v: unknown, what: string, max = Number.MAX_SAFE_INTEGER): number {
  if (v === undefined || v === null) return 0;
  const n = typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 0 || n > max) {
    throw new InvalidRequestError(`${what} must be an integer from 0 to ${max}`);
  }
  return n;
}

// envoy.type.v3.RateLimitUnit by number: protobuf JSON accepts an enum's number as well as its name.
const UNIT_BY_NUMBER = ['UNKNOWN', 'SECOND', 'MINUTE', 'HOUR', 'DAY', 'MONTH', 'YEAR'] as const;

function unitFromJson(v: unknown, what: string): WireUnit | number {
  if (v === undefined || v === null) return 'UNKNOWN';
  // A number outside the enum stays a number for conversion: 7 is WEEK, any other is refused.
  if (typeof v === 'number') return UNIT_BY_NUMBER[v] ?? v;
  return asString(v, what) as WireUnit;
}

function descriptorFromJson(v: unknown, i: number): WireDescriptor {
  const d = asObject(v, `descriptors[${i}]`, FIELDS.descriptor);
  const entries = d.entries ?? [];
  if (!Array.isArray(entries)) throw new InvalidRequestError(`descriptors[${i}].entries must be a list`);
  const limit = d.limit === undefined || d.limit === null ? null : asObject(d.limit, `descriptors[${i}].limit`, FIELDS.limit);
  const hits = field(d, 'hitsAddend', 'hits_addend');
  return {
    entries: entries.map((e, j) => {
      const entry = asObject(e, `descriptors[${i}].entries[${j}]`, FIELDS.entry);
      return {
        key: asString(entry.key, `descriptors[${i}].entries[${j}].key`),
        value: asString(entry.value, `descriptors[${i}].entries[${j}].value`),
      };
    }),
    limit: limit && {
      requests_per_unit: asUint(field(limit, 'requestsPerUnit', 'requests_per_unit'), `descriptors[${i}].limit.requestsPerUnit`, UINT32_MAX),
      unit: unitFromJson(limit.unit, `descriptors[${i}].limit.unit`),
    },
    hits_addend: hits === undefined || hits === null ? null : { value: asUint(hits, `descriptors[${i}].hitsAddend`) },
  };
}

/** The body's bytes as text; InvalidRequestError when they are not UTF-8. */
function utf8Text(body: Buffer): string {
  const text = body.toString('utf8');
  // Invalid bytes decode to U+FFFD, so a text without one was valid; with one (which the
  // caller may also have sent), the bytes are checked exactly.
  if (text.includes('\uFFFD') && !isUtf8(body)) throw new InvalidRequestError('request body is not valid UTF-8');
  return text;
}

/** Parses a /json body into the wire request shape; InvalidRequestError (400) when it does not parse. */
export function wireRequestFromJson(body: Buffer | string): WireRequest {
  let parsed: unknown;
  const text = typeof body === 'string' ? body : utf8Text(body);
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new InvalidRequestError(`request body is not valid JSON: ${(err as Error).message}`);
  }
  const obj = asObject(parsed, 'request body', FIELDS.request);
  const descriptors = obj.descriptors ?? [];
  if (!Array.isArray(descriptors)) throw new InvalidRequestError('descriptors must be a list');
  return {
    domain: asString(obj.domain, 'domain'),
    descriptors: descriptors.map(descriptorFromJson),
    hits_addend: asUint(field(obj, 'hitsAddend', 'hits_addend'), 'hitsAddend', UINT32_MAX),
  };
}

/** The response in protobuf JSON form. */
export function responseToJson(response: RateLimitResponse): Json {
  const out: Json = {
    overallCode: response.overallCode,
    statuses: response.statuses.map((s) => {
      const status: Json = { code: s.code };
      if (s.currentLimit !== undefined) {
        const limit: Json = {};
        if (s.currentLimit.requestsPerUnit !== 0) limit.requestsPerUnit = s.currentLimit.requestsPerUnit;
        limit.unit = s.currentLimit.unit;
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
