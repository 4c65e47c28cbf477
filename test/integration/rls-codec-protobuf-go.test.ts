// floodgate's RLS request decoder against protobuf-go, the decoder of the reference
// (envoyproxy/ratelimit reads requests with grpc-go's codec: proto.Unmarshal with default
// options, google.golang.org/protobuf v1.36.11 and go-control-plane/envoy v1.37.0 as the
// reference pins them). protobuf-go is the judge: on thousands of seeded random and mutated
// messages (message fields written twice and merged, scalars written twice, unknown fields and
// groups, known fields with another wire type, non-minimal varints, bad tags, varints past 64
// bits, lengths past the end, invalid UTF-8), floodgate must refuse exactly what protobuf-go
// refuses (INVALID_ARGUMENT), and what it accepts must read as protobuf-go's reading does after
// the RLS checks of requestFromWire (override unit, hits_addend range).
//
// test/protobuf-go-decoder is built with `go build` (cached by its sources); it prints each
// message as protobuf-go read it, in proto-loader's shape, or its error.
//
// One deliberate difference is kept out of the inputs: unknown groups nest at most 32 deep here
// (MAX_GROUP_DEPTH in proto-reader.ts), protobuf-go allows 10,000.
import { spawnSync } from 'node:child_process';
import * as protoLoader from '@grpc/proto-loader';
import { beforeAll, describe, expect, it } from 'vitest';
import { InvalidRequestError } from '../../src/base/errors';
import { SERVER_PROTO_LOADER_OPTIONS } from '../../src/grpc/protos';
import { requestFromWire } from '../../src/rls/convert';
import { decodeRateLimitRequest } from '../../src/rls/request-decoder';
import type { WireRequest } from '../../src/rls/wire-types';
import { goTestProgram } from '../helpers/go-test-program';
import { type Bytes, len, paddedVarint, tag, varint } from '../helpers/protobuf-wire';
import { mulberry32 } from '../helpers/seeded-random';

// --- protobuf-go --------------------------------------------------------------------------

interface GoRequest {
  domain: string;
  hits_addend: number;
  descriptors: {
    entries: { key: string; value: string }[];
    limit: { requests_per_unit: number; unit: number } | null;
    hits_addend: { value: string } | null;
  }[];
}
type GoAnswer = { ok: GoRequest } | { error: string };

let binary = '';

function protobufGo(messages: readonly Buffer[]): GoAnswer[] {
  const run = spawnSync(binary, [], {
    input: messages.map((m) => m.toString('hex')).join('\n') + '\n',
    maxBuffer: 512 * 1024 * 1024,
    timeout: 60_000,
  });
  if (run.status !== 0) throw new Error(`protobuf-go-decoder failed (${run.status ?? run.signal}): ${run.stderr.toString()}`);
  const lines = run.stdout.toString().trimEnd().split('\n');
  expect(lines.length).toBe(messages.length);
  return lines.map((line) => JSON.parse(line) as GoAnswer);
}

// The unit as proto-loader names it from the same .proto files the server loads: a name when
// the enum has the number, else the number.
const unitDefinition = protoLoader.loadSync('envoy/service/ratelimit/v3/rls.proto', SERVER_PROTO_LOADER_OPTIONS)[
  'envoy.type.v3.RateLimitUnit'
] as unknown as {
  type: { value: { name: string; number: number }[] };
};
const UNIT_NAMES = new Map(unitDefinition.type.value.map((v) => [v.number, v.name]));

function wireFromGo(go: GoRequest): WireRequest {
  return {
    domain: go.domain,
    hits_addend: go.hits_addend,
    descriptors: go.descriptors.map((d) => ({
      entries: d.entries,
      limit: d.limit && {
        requests_per_unit: d.limit.requests_per_unit,
        unit: (UNIT_NAMES.get(d.limit.unit) as 'SECOND' | undefined) ?? d.limit.unit,
      },
      hits_addend: d.hits_addend,
    })),
  };
}

function outcome(f: () => unknown): { value: unknown } | { error: string } {
  try {
    return { value: f() };
  } catch (err) {
    return { error: err instanceof InvalidRequestError ? `InvalidRequestError: ${err.message}` : String(err) };
  }
}

// --- seeded messages ----------------------------------------------------------------------

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
  bytes(n: number): Bytes {
    return Array.from({ length: n }, () => this.int(0, 255));
  }
}

const VALID_TEXT = ['a', 'Z', '0', '/', ' ', '=', 'é', 'ß', '日本', '€', '😀', '\u0000', '\u07ff', '\uffff', '\ufffd', '\u{10ffff}'];
const INVALID_UTF8: readonly Bytes[] = [
  [0xff],
  [0x80],
  [0xf6],
  [0xfc],
  [0xc3],
  [0xc0, 0x80],
  [0xc1, 0xbf],
  [0xe0, 0x80, 0xaf],
  [0xed, 0xa0, 0x80],
  [0xed, 0xbf, 0xbf],
  [0xe2, 0x82],
  [0xf4, 0x90, 0x80, 0x80],
  [0xf8, 0x88, 0x80, 0x80, 0x80],
];

/** A string field's bytes: mostly valid UTF-8 (short, long, multi-byte), sometimes not. */
function text(rng: Rng): Bytes {
  if (rng.chance(0.15)) return [];
  let s = '';
  const n = rng.int(1, rng.chance(0.2) ? 40 : 10);
  const alphabet = rng.chance(0.5) ? VALID_TEXT.slice(0, 6) : VALID_TEXT;
  for (let i = 0; i < n; i++) s += rng.pick(alphabet);
  const bytes = [...Buffer.from(s, 'utf8')];
  if (rng.chance(0.02)) bytes.splice(rng.int(0, bytes.length), 0, ...rng.pick(INVALID_UTF8));
  return bytes;
}

/** A varint, sometimes with more bytes than it needs (protobuf-go reads those). */
function v(rng: Rng, value: bigint): Bytes {
  return rng.chance(0.08) ? paddedVarint(value, rng.int(1, 10)) : varint(value);
}
function t(rng: Rng, field: number, wire: number): Bytes {
  return v(rng, (BigInt(field) << 3n) | BigInt(wire));
}
function lenField(rng: Rng, field: number, body: Bytes): Bytes {
  return [...t(rng, field, 2), ...v(rng, BigInt(body.length)), ...body];
}

const BIG_VALUES = [0n, 1n, 2n, 7n, 300n, 2n ** 31n, 2n ** 32n - 1n, 2n ** 32n, 2n ** 32n + 5n, 2n ** 53n + 1n, 2n ** 63n, 2n ** 64n - 1n];

/** A field with a tag or a value protobuf-go refuses, or a wire type it accepts rarely. */
function hostileField(rng: Rng): Bytes {
  switch (rng.int(0, 9)) {
    case 0: // field number 0
      return [...tag(0, rng.pick([0, 2, 5])), 0];
    case 1: // field numbers past 2^29 - 1, some whose low 32 bits read as a known field
      return [...tag(rng.pick([2n ** 29n, 2n ** 31n - 1n, 2n ** 32n + 1n, 2n ** 32n + 10n, 2n ** 32n + 2n]), rng.pick([0, 2])), 1, 0x78];
    case 2: // reserved wire types, and an end group with no start
      return [...tag(rng.int(1, 20), rng.pick([4, 6, 7])), 0];
    case 3: // a varint value past 64 bits (tenth byte over 1), or eleven bytes long
      return [...tag(rng.int(1, 20), 0), ...Array.from({ length: 9 }, () => 0xff), rng.pick([0x02, 0x7f, 0x80, 0xff])];
    case 4: // the largest varint that fits
      return [...tag(rng.int(1, 20), 0), ...Array.from({ length: 9 }, () => 0xff), 0x01];
    case 5: // a length past 2^32 whose low 32 bits are small
      return [...tag(rng.int(1, 20), 2), ...varint(2n ** 32n + BigInt(rng.int(0, 3))), 0x61, 0x62, 0x63];
    case 6: // a group whose end names another field
      return [...tag(9, 3), ...tag(10, 4)];
    case 7: // inside a group, field numbers up to 2^31 - 1 are valid for protobuf-go; past it, not
      return [...tag(9, 3), ...tag(rng.pick([2n ** 29n, 2n ** 31n - 1n, 2n ** 31n]), 0), 1, ...tag(9, 4)];
    case 8: // the largest valid field number
      return [...tag(2 ** 29 - 1, rng.pick([0, 1, 5])), ...rng.bytes(8)];
    default: // a tag cut short
      return [0x80];
  }
}

/** An unknown field, or a known field number with a random wire type and value. */
function unknownField(rng: Rng, depth = 0): Bytes {
  const field = rng.chance(0.25) ? rng.int(1, 3) : rng.int(4, 40);
  switch (rng.int(0, 7)) {
    case 0:
      return [...t(rng, field, 0), ...v(rng, rng.pick(BIG_VALUES))];
    case 1:
      return [...t(rng, field, 1), ...rng.bytes(8)];
    case 2:
      return [...t(rng, field, 5), ...rng.bytes(4)];
    case 3:
      return lenField(rng, field, rng.chance(0.5) ? text(rng) : rng.bytes(rng.int(0, 12)));
    case 4: // packed varints, also as a known scalar field (protobuf-go skips that as unknown)
      return lenField(rng, field, Array.from({ length: rng.int(0, 4) }, () => varint(rng.pick(BIG_VALUES))).flat());
    case 5: {
      const inner = depth < 3 ? Array.from({ length: rng.int(0, 2) }, () => unknownField(rng, depth + 1)).flat() : [];
      return [...t(rng, field, 3), ...inner, ...t(rng, field, 4)];
    }
    case 6:
      return lenField(rng, field, []);
    default:
      return [...t(rng, field, 0), ...v(rng, BigInt(rng.int(0, 300)))];
  }
}

/** A message body: the given field occurrences in this order, with unknown fields and now and then a hostile one between. */
function body(rng: Rng, fields: readonly Bytes[]): Bytes {
  const chunks = [...fields];
  const extra = rng.chance(0.4) ? rng.int(1, 3) : 0;
  for (let i = 0; i < extra; i++) chunks.splice(rng.int(0, chunks.length), 0, unknownField(rng));
  if (rng.chance(0.015)) chunks.splice(rng.int(0, chunks.length), 0, hostileField(rng));
  return chunks.flat();
}

/** Occurrences of one field in random positions among the others (a scalar or message field written 0..n times). */
function shuffleIn(rng: Rng, ordered: Bytes[], occurrences: readonly Bytes[]): Bytes[] {
  const out = [...ordered];
  for (const o of occurrences) out.splice(rng.int(0, out.length), 0, o);
  return out;
}

function times(rng: Rng, weights: readonly number[]): number {
  let r = rng.next() * weights.reduce((a, b) => a + b, 0);
  for (let i = 0; i < weights.length; i++) {
    r -= weights[i] as number;
    if (r < 0) return i;
  }
  return weights.length - 1;
}

function entry(rng: Rng): Bytes {
  const keys = Array.from({ length: times(rng, [1, 8, 2]) }, () => lenField(rng, 1, text(rng)));
  const values = Array.from({ length: times(rng, [1, 8, 2]) }, () => lenField(rng, 2, text(rng)));
  return lenField(rng, 1, body(rng, shuffleIn(rng, keys, values)));
}

const UNIT_NUMBERS = [1n, 2n, 3n, 4n, 5n, 6n, 1n, 2n, 3n, 0n, 7n, 99n, -1n, 2n ** 32n + 2n];

/** One occurrence of `limit`: requests_per_unit and unit each absent, once or twice. */
function limitPart(rng: Rng): Bytes {
  const rpu = Array.from({ length: times(rng, [2, 6, 1]) }, () => [
    ...t(rng, 1, 0),
    ...v(rng, rng.pick([0n, 1n, 5n, 1000n, 2n ** 32n - 1n, 2n ** 32n + 7n])),
  ]);
  const unit = Array.from({ length: times(rng, [2, 6, 1]) }, () => [...t(rng, 2, 0), ...v(rng, rng.pick(UNIT_NUMBERS))]);
  return lenField(rng, 2, body(rng, shuffleIn(rng, rpu, unit)));
}

/** One occurrence of the hits_addend wrapper: its value absent, once or twice. */
function hitsPart(rng: Rng): Bytes {
  const values = Array.from({ length: times(rng, [3, 6, 1]) }, () => [...t(rng, 1, 0), ...v(rng, rng.pick([...BIG_VALUES, 3n, 3n]))]);
  return lenField(rng, 3, body(rng, values));
}

function descriptor(rng: Rng): Bytes {
  const entries = Array.from({ length: rng.int(0, 3) }, () => entry(rng));
  const limits = Array.from({ length: times(rng, [6, 3, 2, 1]) }, () => limitPart(rng));
  const hits = Array.from({ length: times(rng, [6, 3, 2, 1]) }, () => hitsPart(rng));
  return lenField(rng, 2, body(rng, shuffleIn(rng, shuffleIn(rng, entries, limits), hits)));
}

function request(rng: Rng): Buffer {
  const descriptors = Array.from({ length: rng.int(0, 4) }, () => descriptor(rng));
  const domains = Array.from({ length: times(rng, [1, 8, 1]) }, () => lenField(rng, 1, text(rng)));
  const hits = Array.from({ length: times(rng, [4, 4, 1]) }, () => [...t(rng, 3, 0), ...v(rng, rng.pick(BIG_VALUES))]);
  return Buffer.from(body(rng, shuffleIn(rng, shuffleIn(rng, descriptors, domains), hits)));
}

/** A few byte-level changes: a byte changed, removed, inserted, the message cut, a slice repeated. */
function mutate(rng: Rng, message: Buffer): Buffer {
  const bytes = [...message];
  for (let n = rng.int(1, 3); n > 0; n--) {
    const at = rng.int(0, bytes.length);
    switch (rng.int(0, 4)) {
      case 0:
        if (bytes.length > 0) bytes[Math.min(at, bytes.length - 1)] = rng.int(0, 255);
        break;
      case 1:
        bytes.splice(at, 1);
        break;
      case 2:
        bytes.splice(at, 0, ...rng.bytes(rng.int(1, 3)));
        break;
      case 3:
        bytes.length = at;
        break;
      default: {
        const from = rng.int(0, bytes.length);
        bytes.splice(at, 0, ...bytes.slice(from, from + rng.int(1, 8)));
      }
    }
  }
  return Buffer.from(bytes);
}

// --- the comparison -----------------------------------------------------------------------

describe('decodeRateLimitRequest against protobuf-go (the reference decoder is the judge)', () => {
  // A cold Go build cache compiles go-control-plane first: minutes on a busy machine, once.
  beforeAll(() => {
    binary = goTestProgram('protobuf-go-decoder', ['go.mod', 'go.sum', 'main.go']);
  }, 600_000);

  it('refuses what protobuf-go refuses, and reads what it accepts as protobuf-go reads it', () => {
    const rng = new Rng(mulberry32(20261126));
    const messages: Buffer[] = [];
    for (let i = 0; i < 3000; i++) messages.push(request(rng));
    for (let i = 0; i < 1500; i++) messages.push(mutate(rng, messages[rng.int(0, 2999)] as Buffer));
    const started = performance.now();
    const answers = protobufGo(messages);
    const disagreements: string[] = [];
    let accepted = 0;
    let refusedByGo = 0;
    let refusedAsUtf8 = 0;
    let refusedByChecks = 0;
    messages.forEach((bytes, i) => {
      const go = answers[i] as GoAnswer;
      const mine = outcome(() => decodeRateLimitRequest(bytes));
      if ('error' in go) {
        refusedByGo++;
        if (go.error.includes('UTF-8')) refusedAsUtf8++;
        if (!('error' in mine && mine.error.startsWith('InvalidRequestError')))
          disagreements.push(`${bytes.toString('hex')}: protobuf-go refuses (${go.error}), floodgate gives ${JSON.stringify(mine)}`);
        return;
      }
      const expected = outcome(() => requestFromWire(wireFromGo(go.ok)));
      if ('error' in expected) refusedByChecks++;
      else accepted++;
      if (JSON.stringify(mine) !== JSON.stringify(expected))
        disagreements.push(
          `${bytes.toString('hex')}: protobuf-go reads ${JSON.stringify(go.ok)}, so ${JSON.stringify(expected)}; floodgate gives ${JSON.stringify(mine)}`,
        );
    });
    console.log(
      `codec vs protobuf-go: ${messages.length} messages in ${Math.round(performance.now() - started)} ms; ${accepted} accepted, ` +
        `${refusedByChecks} refused by the RLS checks, ${refusedByGo} refused by protobuf-go (${refusedAsUtf8} for invalid UTF-8); ` +
        `${disagreements.length} disagreements`,
    );
    expect(disagreements.slice(0, 8)).toEqual([]);
    // Every path is exercised, each by a good share of the messages.
    expect(accepted).toBeGreaterThan(1000);
    expect(refusedByChecks).toBeGreaterThan(300);
    expect(refusedAsUtf8).toBeGreaterThan(300);
    expect(refusedByGo - refusedAsUtf8).toBeGreaterThan(800);
  });

  it('agrees on the hand-written cases of the issue', () => {
    const e = len(1, [...len(1, [0x6b]), ...len(2, [0x76])]);
    const d = (...fields: Bytes[]): Bytes => len(2, [...e, ...fields.flat()]);
    const domain = len(1, [0x64]);
    const cases: Bytes[] = [
      [...domain, ...d(len(3, [0x08, 0x02]), len(3, []))], // hits_addend {2} then {}
      [...domain, ...d(len(2, [0x08, 0x07, 0x10, 0x02]), len(2, [0x10, 0x03]))], // limit {7, MINUTE} then {unit: HOUR}
      [...tag(2n ** 32n + 1n, 2), 1, 0x78, ...d()], // field 2^32 + 1, whose low 32 bits are the domain's tag
      [...domain, ...d(), 0x18, ...Array.from({ length: 9 }, () => 0xff), 0x02], // a 10-byte varint past 64 bits
      [...domain, ...len(2, len(1, [...len(1, [0x6b]), ...len(2, [0x4a, 0xf6, 0x72, 0x67])]))], // J\xF6rg
      [0x8a, 0x80, 0x80, 0x80, 0x00, 1, 0x78, ...d()], // the domain's tag in five bytes
    ];
    const answers = protobufGo(cases.map((c) => Buffer.from(c)));
    expect(answers.map((a) => ('error' in a ? 'refused' : 'accepted'))).toEqual([
      'accepted',
      'accepted',
      'refused',
      'refused',
      'refused',
      'accepted',
    ]);
    cases.forEach((bytes, i) => {
      const go = answers[i] as GoAnswer;
      const mine = outcome(() => decodeRateLimitRequest(Buffer.from(bytes)));
      if ('error' in go) expect(mine, Buffer.from(bytes).toString('hex')).toHaveProperty('error');
      else expect(mine, Buffer.from(bytes).toString('hex')).toEqual(outcome(() => requestFromWire(wireFromGo(go.ok))));
    });
  });
});
