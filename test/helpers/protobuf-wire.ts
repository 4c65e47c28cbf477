// A test-side protobuf writer, to put on the wire what an encoder never writes: unknown fields,
// odd orders, fields written twice, varints with more bytes than needed or past 64 bits.

export type Bytes = number[];

/** A varint of a uint64 (a negative value as its two's complement, ten bytes). */
export function varint(v: bigint): Bytes {
  const out: Bytes = [];
  let x = BigInt.asUintN(64, v);
  while (x > 0x7fn) {
    out.push(Number(x & 0x7fn) | 0x80);
    x >>= 7n;
  }
  out.push(Number(x));
  return out;
}

/** The same value in `length` bytes (at most 10), with continuation bytes carrying zeros. */
export function paddedVarint(v: bigint, length: number): Bytes {
  const out = varint(v);
  if (out.length >= length) return out;
  out[out.length - 1] = (out[out.length - 1] as number) | 0x80;
  while (out.length < length - 1) out.push(0x80);
  out.push(0);
  return out;
}

export const tag = (field: number | bigint, wire: number): Bytes => varint((BigInt(field) << 3n) | BigInt(wire));
export const len = (field: number, body: Bytes): Bytes => [...tag(field, 2), ...varint(BigInt(body.length)), ...body];
export const str = (field: number, s: string): Bytes => len(field, [...Buffer.from(s, 'utf8')]);
export const uint = (field: number, v: bigint): Bytes => [...tag(field, 0), ...varint(v)];
