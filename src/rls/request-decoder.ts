import { InvalidRequestError } from '../base/errors';
import type { DescriptorEntry } from '../domain/descriptor';
import type { Unit } from '../domain/units';
import type { LimitOverride, RateLimitRequest, RequestDescriptor } from '../service/types';
import { ProtoReader } from './proto-reader';

// envoy.service.ratelimit.v3.RateLimitRequest bytes → the domain request, in one pass and
// without intermediate message objects. The bytes mean what they mean to protobuf-go, the
// reference's decoder (test/integration/rls-codec-protobuf-go.test.ts compares the two on random
// and mutated messages); then come the checks of requestFromWire (src/rls/convert.ts), with its
// messages, for an invalid override unit (test/integration/rls-codec.test.ts
// compares with proto-loader + requestFromWire). Unknown fields are skipped; a field with an
// unexpected wire type is treated as unknown, as the protobuf spec has it.

// Tags: field number << 3 | wire type.
const TAG_DOMAIN = (1 << 3) | 2;
const TAG_DESCRIPTOR = (2 << 3) | 2;
const TAG_HITS_ADDEND = (3 << 3) | 0;
const TAG_ENTRY = (1 << 3) | 2;
const TAG_LIMIT = (2 << 3) | 2;
const TAG_DESCRIPTOR_HITS = (3 << 3) | 2;
const TAG_KEY = (1 << 3) | 2;
const TAG_VALUE = (2 << 3) | 2;
const TAG_REQUESTS_PER_UNIT = (1 << 3) | 0;
const TAG_UNIT = (2 << 3) | 0;
const TAG_UINT64_VALUE = (1 << 3) | 0;

// envoy.type.v3.RateLimitUnit by number. The request's enum has no WEEK, but the reference reads
// the number as its response enum, where 7 is WEEK, and enforces it. UNKNOWN (0) and any other
// number are refused: the reference crashes on them.
const OVERRIDE_UNITS: readonly (Unit | undefined)[] = [undefined, 'SECOND', 'MINUTE', 'HOUR', 'DAY', 'MONTH', 'YEAR', 'WEEK'];

function decodeEntry(r: ProtoReader): DescriptorEntry {
  const end = r.lengthEnd();
  let key = '';
  let value = '';
  while (r.pos < end) {
    const tag = r.tag();
    if (tag === TAG_KEY) key = r.string();
    else if (tag === TAG_VALUE) value = r.string();
    else r.skip(tag);
  }
  r.expectEnd(end);
  return { key, value };
}

// A message field written more than once is merged, as protobuf-go merges it: each occurrence
// sets only the fields it carries (limit {7, MINUTE} then {unit: HOUR} is 7/HOUR). The checks
// wait for the end of the descriptor, so they see the merged message.

interface OverrideFields {
  requestsPerUnit: number;
  unitNumber: number;
}

function mergeOverride(r: ProtoReader, into: OverrideFields): void {
  const end = r.lengthEnd();
  while (r.pos < end) {
    const tag = r.tag();
    if (tag === TAG_REQUESTS_PER_UNIT) into.requestsPerUnit = r.uint32();
    else if (tag === TAG_UNIT) into.unitNumber = r.int32();
    else r.skip(tag);
  }
  r.expectEnd(end);
}

function checkedOverride(fields: OverrideFields, index: number): LimitOverride {
  const { requestsPerUnit, unitNumber } = fields;
  const unit = unitNumber >= 0 ? OVERRIDE_UNITS[unitNumber] : undefined;
  if (unit === undefined) {
    // proto-loader names the enum's own values and leaves other numbers as numbers.
    const shown = unitNumber === 0 ? 'UNKNOWN' : String(unitNumber);
    throw new InvalidRequestError(`descriptor ${index}: limit override has invalid unit '${shown}'`);
  }
  return { requestsPerUnit, unit };
}

/**
 * The descriptor's hits_addend wrapper, merged: any uint64 (google.protobuf.UInt64Value), read
 * as a number (exact up to 2^53, as protobufjs' Long.toNumber and the reference's float64 give
 * it past that). Nothing is refused: the reference counts any value (issue 27); the service
 * counts at most HITS_COUNTED_MAX of it.
 */
function mergeHitsAddend(r: ProtoReader, into: { hits: number }): void {
  const end = r.lengthEnd();
  while (r.pos < end) {
    const tag = r.tag();
    if (tag === TAG_UINT64_VALUE) into.hits = r.uint64();
    else r.skip(tag);
  }
  r.expectEnd(end);
}

function decodeDescriptor(r: ProtoReader, index: number): RequestDescriptor {
  const end = r.lengthEnd();
  const entries: DescriptorEntry[] = [];
  let override: OverrideFields | undefined;
  let hits: { hits: number } | undefined;
  while (r.pos < end) {
    const tag = r.tag();
    if (tag === TAG_ENTRY) entries.push(decodeEntry(r));
    else if (tag === TAG_LIMIT) mergeOverride(r, (override ??= { requestsPerUnit: 0, unitNumber: 0 }));
    else if (tag === TAG_DESCRIPTOR_HITS) mergeHitsAddend(r, (hits ??= { hits: 0 }));
    else r.skip(tag);
  }
  r.expectEnd(end);
  if (override === undefined && hits === undefined) return { entries };
  const limit = override && checkedOverride(override, index);
  const hitsAddend = hits?.hits;
  if (hitsAddend === undefined) return { entries, limit };
  if (limit === undefined) return { entries, hitsAddend };
  return { entries, limit, hitsAddend };
}

/**
 * Decodes a RateLimitRequest. Throws InvalidRequestError (INVALID_ARGUMENT) for bytes that are
 * not a well-formed message and for an invalid override unit. The wire's
 * hits_addend 0 means "not set" and becomes 1 (hitsAddendAsSent keeps what was sent).
 */
export function decodeRateLimitRequest(buf: Buffer): RateLimitRequest {
  const r = new ProtoReader(buf);
  const end = buf.length;
  let domain = '';
  const descriptors: RequestDescriptor[] = [];
  let hitsAddend = 0;
  while (r.pos < end) {
    const tag = r.tag();
    if (tag === TAG_DESCRIPTOR) descriptors.push(decodeDescriptor(r, descriptors.length));
    else if (tag === TAG_DOMAIN) domain = r.string();
    else if (tag === TAG_HITS_ADDEND) hitsAddend = r.uint32();
    else r.skip(tag);
  }
  return { domain, descriptors, hitsAddend: hitsAddend || 1, hitsAddendAsSent: hitsAddend };
}
