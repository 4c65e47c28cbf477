import { InvalidRequestError } from '../errors';
import type { DescriptorEntry } from '../domain/descriptor';
import { UINT32_MAX } from '../domain/uint32';
import type { Unit } from '../domain/units';
import type { LimitOverride, RateLimitRequest, RequestDescriptor } from '../service/types';
import { ProtoReader } from './proto-reader';

// envoy.service.ratelimit.v3.RateLimitRequest bytes → the domain request, in one pass and
// without protobufjs' intermediate message objects. It gives exactly what proto-loader's
// decoding (with the server's options, 64-bit integers as decimal strings) followed by
// requestFromWire (src/rls/convert.ts) gives, including the errors for
// an invalid override unit or hits_addend (test/integration/rls-codec.test.ts compares both on
// random messages). Unknown fields are skipped; a field with an unexpected wire type is treated
// as unknown, as the protobuf spec has it.

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
    const tag = r.uint32();
    if (tag === TAG_KEY) key = r.string();
    else if (tag === TAG_VALUE) value = r.string();
    else r.skip(tag);
  }
  r.expectEnd(end);
  return { key, value };
}

function decodeOverride(r: ProtoReader, index: number): LimitOverride {
  const end = r.lengthEnd();
  let requestsPerUnit = 0;
  let unitNumber = 0;
  while (r.pos < end) {
    const tag = r.uint32();
    if (tag === TAG_REQUESTS_PER_UNIT) requestsPerUnit = r.uint32();
    else if (tag === TAG_UNIT) unitNumber = r.int32();
    else r.skip(tag);
  }
  r.expectEnd(end);
  const unit = unitNumber >= 0 ? OVERRIDE_UNITS[unitNumber] : undefined;
  if (unit === undefined) {
    // proto-loader names the enum's own values and leaves other numbers as numbers.
    const shown = unitNumber === 0 ? 'UNKNOWN' : String(unitNumber);
    throw new InvalidRequestError(`descriptor ${index}: limit override has invalid unit '${shown}'`);
  }
  return { requestsPerUnit, unit };
}

function decodeHitsAddend(r: ProtoReader, index: number): number {
  const end = r.lengthEnd();
  let hits = 0;
  let text: string | undefined;
  while (r.pos < end) {
    const tag = r.uint32();
    if (tag === TAG_UINT64_VALUE) {
      const start = r.pos;
      hits = r.uint64();
      text = undefined;
      // Only a value about to be refused needs its exact digits (past 2^53 a number loses them).
      if (hits > UINT32_MAX) {
        r.pos = start;
        text = r.uint64Text();
      }
    } else r.skip(tag);
  }
  r.expectEnd(end);
  if (hits > UINT32_MAX)
    throw new InvalidRequestError(`descriptor ${index}: hits_addend ${text ?? String(hits)} is out of range (0 to ${UINT32_MAX})`);
  return hits;
}

function decodeDescriptor(r: ProtoReader, index: number): RequestDescriptor {
  const end = r.lengthEnd();
  const entries: DescriptorEntry[] = [];
  // A repeated sub-message field read twice keeps the last one, as protobufjs does. Its
  // validation waits for the end of the descriptor, so the error is about the one kept.
  let limitStart = -1;
  let hitsStart = -1;
  while (r.pos < end) {
    const tag = r.uint32();
    if (tag === TAG_ENTRY) entries.push(decodeEntry(r));
    else if (tag === TAG_LIMIT) {
      limitStart = r.pos;
      r.skip(tag);
    } else if (tag === TAG_DESCRIPTOR_HITS) {
      hitsStart = r.pos;
      r.skip(tag);
    } else r.skip(tag);
  }
  r.expectEnd(end);
  if (limitStart < 0 && hitsStart < 0) return { entries };
  let limit: LimitOverride | undefined;
  let hitsAddend: number | undefined;
  if (limitStart >= 0) {
    r.pos = limitStart;
    limit = decodeOverride(r, index);
  }
  if (hitsStart >= 0) {
    r.pos = hitsStart;
    hitsAddend = decodeHitsAddend(r, index);
  }
  r.pos = end;
  if (hitsAddend === undefined) return { entries, limit };
  if (limit === undefined) return { entries, hitsAddend };
  return { entries, limit, hitsAddend };
}

/**
 * Decodes a RateLimitRequest. Throws InvalidRequestError (INVALID_ARGUMENT) for bytes that are
 * not a well-formed message and for an invalid override unit or hits_addend. The wire's
 * hits_addend 0 means "not set" and becomes 1 (hitsAddendAsSent keeps what was sent).
 */
export function decodeRateLimitRequest(buf: Buffer): RateLimitRequest {
  const r = new ProtoReader(buf);
  const end = buf.length;
  let domain = '';
  const descriptors: RequestDescriptor[] = [];
  let hitsAddend = 0;
  while (r.pos < end) {
    const tag = r.uint32();
    if (tag === TAG_DESCRIPTOR) descriptors.push(decodeDescriptor(r, descriptors.length));
    else if (tag === TAG_DOMAIN) domain = r.string();
    else if (tag === TAG_HITS_ADDEND) hitsAddend = r.uint32();
    else r.skip(tag);
  }
  return { domain, descriptors, hitsAddend: hitsAddend || 1, hitsAddendAsSent: hitsAddend };
}
