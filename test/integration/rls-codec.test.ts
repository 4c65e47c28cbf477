// floodgate's own RLS codec (src/rls/) against protobufjs, as @grpc/proto-loader drives it with
// the server's usual options, on seeded random messages: the request decoder must give what
// proto-loader's decoding + requestFromWire gives (values and errors), and the response
// encoder's bytes, decoded by protobufjs, what responseToWire gives. Reads the .proto files.
// protobufjs keeps the last of a message field written twice where protobuf-go (the reference's
// decoder, and the judge) merges them: the requests here write each once, and
// rls-codec-protobuf-go.test.ts compares the decoder with protobuf-go on every encoding.
import * as protoLoader from '@grpc/proto-loader';
import { describe, expect, it } from 'vitest';
import { InvalidRequestError } from '../../src/base/errors';
import { PROTO_LOADER_OPTIONS, SERVER_PROTO_LOADER_OPTIONS } from '../../src/grpc/protos';
import { requestFromWire } from '../../src/rls/convert';
import type { WireRequest, WireResponse } from '../../src/rls/wire-types';
import { decodeRateLimitRequest } from '../../src/rls/request-decoder';
import { encodeRateLimitResponse } from '../../src/rls/response-encoder';
import { responseToWire } from '../helpers/response-to-wire';
import type { CurrentLimit, DescriptorStatus, HeaderPair, RateLimitResponse } from '../../src/service/types';
import type { Unit } from '../../src/domain/units';
import { len, str, tag, varint } from '../helpers/protobuf-wire';
import { mulberry32 } from '../helpers/seeded-random';

const rlsMethod = (options: protoLoader.Options): protoLoader.MethodDefinition<object, object> =>
  (
    protoLoader.loadSync('envoy/service/ratelimit/v3/rls.proto', options)[
      'envoy.service.ratelimit.v3.RateLimitService'
    ] as protoLoader.ServiceDefinition
  ).ShouldRateLimit!;
// Requests as the server read them before its own decoder (64-bit integers as exact decimal
// strings); responses as a client with the usual options reads them.
const serverMethod = rlsMethod(SERVER_PROTO_LOADER_OPTIONS);
const method = rlsMethod(PROTO_LOADER_OPTIONS);
const pbRequestToBytes = (o: object): Buffer => method.requestSerialize(o);
const pbRequestFromBytes = (b: Buffer): WireRequest => serverMethod.requestDeserialize(b) as WireRequest;
const pbResponseToBytes = (o: object): Buffer => method.responseSerialize(o);
const pbResponseFromBytes = (b: Buffer): WireResponse => method.responseDeserialize(b) as WireResponse;

// --- seeded randomness ------------------------------------------------------------------

class Rng {
  constructor(readonly next: () => number) {}
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  pick<T>(xs: readonly T[]): T {
    return xs[this.int(0, xs.length - 1)] as T;
  }
  string(): string {
    const kind = this.int(0, 5);
    if (kind === 0) return '';
    const alphabet =
      kind === 1
        ? ['a', 'b', '/', '.', '_', '0']
        : ['a', 'Z', ' ', 'é', 'ß', '日本', '€', '😀', '\u0000', '\u07ff', '\uffff', '{', '}', ':', '='];
    let s = '';
    const n = this.int(1, kind === 5 ? 60 : 12);
    for (let i = 0; i < n; i++) s += this.pick(alphabet);
    return s;
  }
}

/** A random unknown field: varint, fixed64, fixed32, bytes, packed or unpacked repeated varints, a group. */
function unknownField(rng: Rng, field: number): number[] {
  switch (rng.int(0, 6)) {
    case 0:
      return [...tag(field, 0), ...varint(BigInt(rng.int(0, 2 ** 31)) * BigInt(rng.int(1, 2 ** 20)))];
    case 1:
      return [...tag(field, 1), ...Array.from({ length: 8 }, () => rng.int(0, 255))];
    case 2:
      return [...tag(field, 5), ...Array.from({ length: 4 }, () => rng.int(0, 255))];
    case 3:
      return len(
        field,
        Array.from({ length: rng.int(0, 20) }, () => rng.int(0, 255)),
      );
    case 4: // packed repeated
      return len(field, Array.from({ length: rng.int(0, 5) }, () => varint(BigInt(rng.int(0, 300000)))).flat());
    case 5: // unpacked repeated
      return Array.from({ length: rng.int(1, 3) }, () => [...tag(field, 0), ...varint(BigInt(rng.int(0, 300000)))]).flat();
    default: // a group with a field inside
      return [...tag(field, 3), ...tag(1, 0), ...varint(5n), ...tag(field, 4)];
  }
}

/** Chunks in random order (keeping the order of repeated fields) with unknown fields between. */
function message(rng: Rng, scalars: number[][], repeated: number[][], firstUnknown: number): number[] {
  const chunks = [...repeated];
  for (const s of scalars) chunks.splice(rng.int(0, chunks.length), 0, s);
  const unknowns = rng.chance(0.5) ? rng.int(1, 3) : 0;
  for (let i = 0; i < unknowns; i++) chunks.splice(rng.int(0, chunks.length), 0, unknownField(rng, rng.int(firstUnknown, firstUnknown + 40)));
  return chunks.flat();
}

interface Gen {
  domain: string;
  hits: number;
  descriptors: { entries: [string, string][]; limit?: [number, bigint]; hits?: bigint }[];
}

function randomRequest(rng: Rng): Gen {
  const g: Gen = { domain: rng.string(), hits: rng.pick([0, 0, 1, 2, 7, 300, 2 ** 32 - 1]), descriptors: [] };
  const n = rng.int(0, 4);
  for (let i = 0; i < n; i++) {
    const entries: [string, string][] = Array.from({ length: rng.int(0, 4) }, () => [rng.string(), rng.string()]);
    const d: Gen['descriptors'][number] = { entries };
    // Mostly valid units, sometimes UNKNOWN, a number outside the enum or a negative one.
    if (rng.chance(0.3)) d.limit = [rng.pick([0, 1, 5, 1000, 2 ** 32 - 1]), BigInt(rng.chance(0.9) ? rng.int(1, 6) : rng.pick([0, 7, 99, -1]))];
    if (rng.chance(0.3)) d.hits = rng.pick([0n, 1n, 3n, 2n ** 32n - 1n, 2n ** 32n, 2n ** 40n, 2n ** 53n + 1n, 2n ** 64n - 1n]);
    g.descriptors.push(d);
  }
  return g;
}

function requestBytes(rng: Rng, g: Gen): Buffer {
  const descriptors = g.descriptors.map((d) => {
    const entries = d.entries.map(([k, v]) =>
      len(1, message(rng, [k !== '' || rng.chance(0.2) ? str(1, k) : [], v !== '' || rng.chance(0.2) ? str(2, v) : []], [], 3)),
    );
    const scalars: number[][] = [];
    if (d.limit)
      scalars.push(
        len(
          2,
          message(
            rng,
            [
              [...tag(1, 0), ...varint(BigInt(d.limit[0]))],
              [...tag(2, 0), ...varint(d.limit[1])],
            ],
            [],
            3,
          ),
        ),
      );
    if (d.hits !== undefined)
      scalars.push(len(3, message(rng, d.hits !== 0n || rng.chance(0.5) ? [[...tag(1, 0), ...varint(d.hits)]] : [], [], 2)));
    return len(2, message(rng, scalars, entries, 4));
  });
  const scalars = [str(1, g.domain), [...tag(3, 0), ...varint(BigInt(g.hits))]];
  // A scalar field written twice: the last one counts.
  if (rng.chance(0.1)) scalars.unshift(str(1, 'overwritten'));
  return Buffer.from(message(rng, scalars, descriptors, 4));
}

function outcome(f: () => unknown): unknown {
  try {
    return { value: f() };
  } catch (err) {
    return { error: err instanceof InvalidRequestError ? `InvalidRequestError: ${err.message}` : String(err) };
  }
}

describe('decodeRateLimitRequest against protobufjs', () => {
  it('gives what proto-loader + requestFromWire gives on 3000 random messages with unknown fields', () => {
    const rng = new Rng(mulberry32(20261126));
    let errors = 0;
    for (let i = 0; i < 3000; i++) {
      const bytes = requestBytes(rng, randomRequest(rng));
      const mine = outcome(() => decodeRateLimitRequest(bytes));
      const reference = outcome(() => requestFromWire(pbRequestFromBytes(bytes)));
      expect(mine, `message ${i}: ${bytes.toString('hex')}`).toEqual(reference);
      if ((reference as { error?: string }).error) errors++;
    }
    // Both paths are exercised: valid requests and the invalid-unit / out-of-range-hits errors.
    expect(errors).toBeGreaterThan(100);
    expect(errors).toBeLessThan(2500);
  });

  it('gives the same on messages protobufjs itself encodes, and on the empty message', () => {
    const rng = new Rng(mulberry32(7));
    for (let i = 0; i < 500; i++) {
      const g = randomRequest(rng);
      const object = {
        domain: g.domain,
        hits_addend: g.hits,
        descriptors: g.descriptors.map((d) => ({
          entries: d.entries.map(([key, value]) => ({ key, value })),
          ...(d.limit ? { limit: { requests_per_unit: d.limit[0], unit: Number(d.limit[1]) } } : {}),
          ...(d.hits !== undefined && d.hits < 2n ** 53n ? { hits_addend: { value: Number(d.hits) } } : {}),
        })),
      };
      const bytes = pbRequestToBytes(object);
      expect(outcome(() => decodeRateLimitRequest(bytes))).toEqual(outcome(() => requestFromWire(pbRequestFromBytes(bytes))));
    }
    expect(decodeRateLimitRequest(Buffer.alloc(0))).toEqual({ domain: '', descriptors: [], hitsAddend: 1, hitsAddendAsSent: 0 });
  });

  it('answers damaged bytes with an InvalidRequestError or a result, never another error', () => {
    const rng = new Rng(mulberry32(99));
    let rejected = 0;
    for (let i = 0; i < 3000; i++) {
      const bytes = requestBytes(rng, randomRequest(rng));
      const damaged = Buffer.from(bytes.subarray(0, rng.int(0, bytes.length)));
      for (let j = rng.int(0, 3); j > 0 && damaged.length > 0; j--) damaged[rng.int(0, damaged.length - 1)] = rng.int(0, 255);
      try {
        decodeRateLimitRequest(damaged);
      } catch (err) {
        expect(err).toBeInstanceOf(InvalidRequestError);
        rejected++;
      }
    }
    expect(rejected).toBeGreaterThan(500);
  });
});

// --- responses --------------------------------------------------------------------------

const UNITS: readonly Unit[] = ['SECOND', 'MINUTE', 'HOUR', 'DAY', 'WEEK', 'MONTH', 'YEAR'];

function randomJson(rng: Rng, depth: number): unknown {
  switch (rng.int(0, depth > 3 ? 3 : 5)) {
    case 0:
      return rng.string();
    case 1:
      return rng.pick([0, -0, 1, -1, 0.5, 1e300, -123456789.125, 2 ** 53, Number.NaN, Infinity]);
    case 2:
      return rng.chance(0.5);
    case 3:
      return null;
    case 4:
      return Array.from({ length: rng.int(0, 3) }, () => randomJson(rng, depth + 1));
    default:
      return Object.fromEntries(Array.from({ length: rng.int(0, 3) }, () => [rng.string(), randomJson(rng, depth + 1)]));
  }
}

function randomResponse(rng: Rng, limits: readonly CurrentLimit[]): RateLimitResponse {
  const header = (): HeaderPair => ({ key: rng.string(), value: rng.string() });
  const statuses: DescriptorStatus[] = Array.from({ length: rng.int(0, 5) }, () => {
    const code = rng.chance(0.7) ? 'OK' : 'OVER_LIMIT';
    const limitRemaining = rng.pick([0, 1, 99, 4294967295]);
    if (rng.chance(0.2)) return { code, limitRemaining, durationUntilResetSeconds: 0 };
    // Fresh objects and shared ones, as the service gives both.
    const currentLimit: CurrentLimit = rng.chance(0.5)
      ? rng.pick(limits)
      : { ...(rng.chance(0.5) ? { name: rng.string() } : {}), requestsPerUnit: rng.pick([0, 1, 10, 1e9, 4294967295]), unit: rng.pick(UNITS) };
    return { code, currentLimit, limitRemaining, durationUntilResetSeconds: rng.pick([0, 1, 59, 3600, 31536000, 2 ** 40, -1]) };
  });
  return {
    overallCode: rng.chance(0.7) ? 'OK' : 'OVER_LIMIT',
    statuses,
    responseHeadersToAdd: Array.from({ length: rng.chance(0.5) ? rng.int(1, 4) : 0 }, header),
    requestHeadersToAdd: Array.from({ length: rng.chance(0.2) ? rng.int(1, 2) : 0 }, header),
    ...(rng.chance(0.4)
      ? {
          dynamicMetadata:
            randomJson(rng, 4) === null
              ? {}
              : Object.fromEntries(Array.from({ length: rng.int(0, 4) }, () => [rng.string(), randomJson(rng, 0)])),
        }
      : {}),
  };
}

describe('encodeRateLimitResponse against protobufjs', () => {
  it('decodes, with protobufjs, to what responseToWire gives, on 3000 random responses', () => {
    const rng = new Rng(mulberry32(42));
    const limits: CurrentLimit[] = [
      { name: 'per_ip', requestsPerUnit: 10, unit: 'MINUTE' },
      { requestsPerUnit: 1, unit: 'HOUR' },
      { name: 'ünïcode 😀', requestsPerUnit: 4294967295, unit: 'WEEK' },
    ];
    let withMetadata = 0;
    for (let i = 0; i < 3000; i++) {
      const response = randomResponse(rng, limits);
      if (response.dynamicMetadata !== undefined) withMetadata++;
      const mine = pbResponseFromBytes(encodeRateLimitResponse(response));
      // protobufjs' own round trip of the object the previous codec path produced.
      const reference = pbResponseFromBytes(pbResponseToBytes(responseToWire(response)));
      expect(mine, `response ${i}: ${JSON.stringify(response)}`).toEqual(reference);
      // And the same again, now that the shared limits' encodings are cached.
      expect(pbResponseFromBytes(encodeRateLimitResponse(response))).toEqual(reference);
    }
    expect(withMetadata).toBeGreaterThan(500);
  });

  it('writes the canonical bytes of a typical answer', () => {
    const bytes = encodeRateLimitResponse({
      overallCode: 'OK',
      statuses: [
        { code: 'OK', currentLimit: { name: 'n', requestsPerUnit: 10, unit: 'MINUTE' }, limitRemaining: 9, durationUntilResetSeconds: 42 },
      ],
      responseHeadersToAdd: [],
      requestHeadersToAdd: [],
    });
    // overall_code OK; statuses { code OK, current_limit { rpu 10, unit MINUTE, name "n" }, limit_remaining 9, duration { seconds 42 } }
    expect(bytes.toString('hex')).toBe('0801' + '12' + '11' + '0801' + '1207' + '080a' + '1002' + '1a016e' + '1809' + '2202' + '082a');
  });
});
