import type { CurrentLimit, DescriptorStatus, HeaderPair, RateLimitResponse } from '../service/types';
import type { Unit } from '../domain/units';
import { int64Size, ProtoWriter, utf8Size, varint32Size } from './proto-writer';

// The domain response → envoy.service.ratelimit.v3.RateLimitResponse bytes, sized first and
// written once, with no protobufjs message objects in between. Fields at their default value
// are left out (proto3's canonical form, as Go's encoder writes it); message fields that carry
// presence (current_limit, duration_until_reset, every Value of a Struct) are always written.
// Decoded by protobufjs, the bytes give exactly what the reference
// mapping responseToWire (test/helpers/response-to-wire.ts) gives
// (test/integration/rls-codec.test.ts).

const CODE_NUMBER = { OK: 1, OVER_LIMIT: 2 } as const;
const UNIT_NUMBER: Readonly<Record<Unit, number>> = { SECOND: 1, MINUTE: 2, HOUR: 3, DAY: 4, MONTH: 5, YEAR: 6, WEEK: 7 };

// Tags: field number << 3 | wire type.
const TAG_OVERALL_CODE = (1 << 3) | 0;
const TAG_STATUS = (2 << 3) | 2;
const TAG_RESPONSE_HEADER = (3 << 3) | 2;
const TAG_REQUEST_HEADER = (4 << 3) | 2;
const TAG_DYNAMIC_METADATA = (6 << 3) | 2;
const TAG_CODE = (1 << 3) | 0;
const TAG_CURRENT_LIMIT = (2 << 3) | 2;
const TAG_LIMIT_REMAINING = (3 << 3) | 0;
const TAG_DURATION = (4 << 3) | 2;
const TAG_REQUESTS_PER_UNIT = (1 << 3) | 0;
const TAG_UNIT = (2 << 3) | 0;
const TAG_NAME = (3 << 3) | 2;
const TAG_SECONDS = (1 << 3) | 0;
const TAG_HEADER_KEY = (1 << 3) | 2;
const TAG_HEADER_VALUE = (2 << 3) | 2;
// google.protobuf.Struct / Value / ListValue
const TAG_STRUCT_FIELD = (1 << 3) | 2;
const TAG_MAP_KEY = (1 << 3) | 2;
const TAG_MAP_VALUE = (2 << 3) | 2;
const TAG_NULL_VALUE = (1 << 3) | 0;
const TAG_NUMBER_VALUE = (2 << 3) | 1;
const TAG_STRING_VALUE = (3 << 3) | 2;
const TAG_BOOL_VALUE = (4 << 3) | 0;
const TAG_STRUCT_VALUE = (5 << 3) | 2;
const TAG_LIST_VALUE = (6 << 3) | 2;
const TAG_LIST_ITEM = (1 << 3) | 2;

/** A length-delimited field: tag, length, body. */
const fieldSize = (bodySize: number): number => 1 + varint32Size(bodySize) + bodySize;

// --- the encoded form of a current_limit, kept per CurrentLimit object --------------------

/** The RateLimit message body of `limit`; a service that reuses its CurrentLimit objects gets it from the cache. */
const currentLimitBodies = new WeakMap<CurrentLimit, Buffer>();

function currentLimitBody(limit: CurrentLimit): Buffer {
  let body = currentLimitBodies.get(limit);
  if (body !== undefined) return body;
  const requestsPerUnit = limit.requestsPerUnit >>> 0;
  const unit = UNIT_NUMBER[limit.unit] ?? 0;
  const name = limit.name ?? '';
  const nameSize = utf8Size(name);
  const size =
    (requestsPerUnit !== 0 ? 1 + varint32Size(requestsPerUnit) : 0) +
    (unit !== 0 ? 1 + varint32Size(unit) : 0) +
    (nameSize !== 0 ? fieldSize(nameSize) : 0);
  const w = new ProtoWriter(Buffer.allocUnsafe(size));
  if (requestsPerUnit !== 0) {
    w.byte(TAG_REQUESTS_PER_UNIT);
    w.varint32(requestsPerUnit);
  }
  if (unit !== 0) {
    w.byte(TAG_UNIT);
    w.varint32(unit);
  }
  if (nameSize !== 0) {
    w.byte(TAG_NAME);
    w.varint32(nameSize);
    w.utf8(name, nameSize);
  }
  body = w.buf;
  currentLimitBodies.set(limit, body);
  return body;
}

// --- sizes ------------------------------------------------------------------------------

function durationBodySize(seconds: number): number {
  return seconds !== 0 ? 1 + int64Size(seconds) : 0;
}

function statusBodySize(s: DescriptorStatus, limitBody: Buffer | undefined): number {
  let size = 2; // code: OK or OVER_LIMIT, never the default
  const remaining = s.limitRemaining >>> 0;
  if (remaining !== 0) size += 1 + varint32Size(remaining);
  if (limitBody !== undefined) size += fieldSize(limitBody.length) + fieldSize(durationBodySize(s.durationUntilResetSeconds));
  return size;
}

function headerBodySize(h: HeaderPair, keySize: number, valueSize: number): number {
  return (h.key !== '' ? fieldSize(keySize) : 0) + (h.value !== '' ? fieldSize(valueSize) : 0);
}

// --- google.protobuf.Struct from a plain JSON object (dynamic metadata, off by default) ---

/** Value bytes of `v`, with the same mapping as structToWire in test/helpers/response-to-wire.ts. */
function valueBytes(v: unknown): Buffer {
  if (v === null || v === undefined) return Buffer.from([TAG_NULL_VALUE, 0]);
  if (typeof v === 'number') {
    const w = new ProtoWriter(Buffer.allocUnsafe(9));
    w.byte(TAG_NUMBER_VALUE);
    w.double(v);
    return w.buf;
  }
  if (typeof v === 'boolean') return Buffer.from([TAG_BOOL_VALUE, v ? 1 : 0]);
  if (Array.isArray(v)) return lengthDelimited(TAG_LIST_VALUE, Buffer.concat(v.map((item) => lengthDelimited(TAG_LIST_ITEM, valueBytes(item)))));
  if (typeof v === 'object') return lengthDelimited(TAG_STRUCT_VALUE, structBytes(v as Record<string, unknown>));
  if (typeof v === 'string') return stringField(TAG_STRING_VALUE, v);
  // What is left has no JSON form: a bigint (a YAML integer past 2^53), a symbol or a function.
  return stringField(TAG_STRING_VALUE, typeof v === 'function' ? Function.prototype.toString.call(v) : (v as bigint | symbol).toString());
}

function structBytes(obj: Readonly<Record<string, unknown>>): Buffer {
  const fields: Buffer[] = [];
  for (const [k, v] of Object.entries(obj)) {
    fields.push(lengthDelimited(TAG_STRUCT_FIELD, Buffer.concat([stringField(TAG_MAP_KEY, k), lengthDelimited(TAG_MAP_VALUE, valueBytes(v))])));
  }
  return Buffer.concat(fields);
}

function stringField(tag: number, s: string): Buffer {
  const size = utf8Size(s);
  const w = new ProtoWriter(Buffer.allocUnsafe(fieldSize(size)));
  w.byte(tag);
  w.varint32(size);
  w.utf8(s, size);
  return w.buf;
}

function lengthDelimited(tag: number, body: Buffer): Buffer {
  const w = new ProtoWriter(Buffer.allocUnsafe(fieldSize(body.length)));
  w.byte(tag);
  w.varint32(body.length);
  w.bytes(body);
  return w.buf;
}

// --- the response ----------------------------------------------------------------------

// Indexed loops: for-of makes an iterator object for a frozen array (the service's shared empty list).
function writeHeaders(w: ProtoWriter, tag: number, headers: readonly HeaderPair[]): void {
  for (let i = 0; i < headers.length; i++) {
    const h = headers[i] as HeaderPair;
    const keySize = utf8Size(h.key);
    const valueSize = utf8Size(h.value);
    w.byte(tag);
    w.varint32(headerBodySize(h, keySize, valueSize));
    if (h.key !== '') {
      w.byte(TAG_HEADER_KEY);
      w.varint32(keySize);
      w.utf8(h.key, keySize);
    }
    if (h.value !== '') {
      w.byte(TAG_HEADER_VALUE);
      w.varint32(valueSize);
      w.utf8(h.value, valueSize);
    }
  }
}

function headersSize(headers: readonly HeaderPair[]): number {
  let size = 0;
  for (let i = 0; i < headers.length; i++) {
    const h = headers[i] as HeaderPair;
    size += fieldSize(headerBodySize(h, utf8Size(h.key), utf8Size(h.value)));
  }
  return size;
}

/** Encodes a RateLimitResponse. */
export function encodeRateLimitResponse(response: RateLimitResponse): Buffer {
  return encode(response, 0);
}

/** gRPC's message prefix: a flag byte (0, not compressed) and the length, big-endian. */
const GRPC_PREFIX_BYTES = 5;

/**
 * Encodes a RateLimitResponse as one gRPC length-prefixed message, in one buffer: what the
 * node:http2 handler (grpc/rls-stream-handler.ts) writes as the answer's DATA.
 */
export function encodeRateLimitResponseMessage(response: RateLimitResponse): Buffer {
  const buf = encode(response, GRPC_PREFIX_BYTES);
  buf[0] = 0;
  buf.writeUInt32BE(buf.length - GRPC_PREFIX_BYTES, 1);
  return buf;
}

/** The message after `reserved` bytes left for the caller. */
function encode(response: RateLimitResponse, reserved: number): Buffer {
  const statuses = response.statuses;
  let size = 2; // overall_code: OK or OVER_LIMIT, never the default
  for (let i = 0; i < statuses.length; i++) {
    const s = statuses[i] as DescriptorStatus;
    size += fieldSize(statusBodySize(s, s.currentLimit === undefined ? undefined : currentLimitBody(s.currentLimit)));
  }
  size += headersSize(response.responseHeadersToAdd) + headersSize(response.requestHeadersToAdd);
  const metadata = response.dynamicMetadata === undefined ? undefined : structBytes(response.dynamicMetadata);
  if (metadata !== undefined) size += fieldSize(metadata.length);

  const w = new ProtoWriter(Buffer.allocUnsafe(reserved + size));
  w.pos = reserved;
  w.byte(TAG_OVERALL_CODE);
  w.byte(CODE_NUMBER[response.overallCode]);
  for (let i = 0; i < statuses.length; i++) {
    const s = statuses[i] as DescriptorStatus;
    const limitBody = s.currentLimit === undefined ? undefined : currentLimitBody(s.currentLimit);
    w.byte(TAG_STATUS);
    w.varint32(statusBodySize(s, limitBody));
    w.byte(TAG_CODE);
    w.byte(CODE_NUMBER[s.code]);
    if (limitBody !== undefined) {
      w.byte(TAG_CURRENT_LIMIT);
      w.varint32(limitBody.length);
      w.bytes(limitBody);
    }
    const remaining = s.limitRemaining >>> 0;
    if (remaining !== 0) {
      w.byte(TAG_LIMIT_REMAINING);
      w.varint32(remaining);
    }
    if (limitBody !== undefined) {
      const seconds = s.durationUntilResetSeconds;
      w.byte(TAG_DURATION);
      w.varint32(durationBodySize(seconds));
      if (seconds !== 0) {
        w.byte(TAG_SECONDS);
        w.int64(seconds);
      }
    }
  }
  writeHeaders(w, TAG_RESPONSE_HEADER, response.responseHeadersToAdd);
  writeHeaders(w, TAG_REQUEST_HEADER, response.requestHeadersToAdd);
  if (metadata !== undefined) {
    w.byte(TAG_DYNAMIC_METADATA);
    w.varint32(metadata.length);
    w.bytes(metadata);
  }
  if (w.pos !== reserved + size) throw new Error(`RateLimitResponse encoder: wrote ${w.pos - reserved} bytes, sized ${size}`);
  return w.buf;
}
