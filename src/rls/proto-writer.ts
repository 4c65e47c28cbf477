// The protobuf wire format, write side: sizes first, then one write into a buffer of exactly
// that size (response-encoder.ts). Numbers follow protobufjs' conversions: uint32 fields take
// `value >>> 0`, int64 fields the integer part of a finite number.

const TWO_32 = 4294967296;

/** Bytes of a uint32 varint. */
export function varint32Size(v: number): number {
  return v < 0x80 ? 1 : v < 0x4000 ? 2 : v < 0x200000 ? 3 : v < 0x10000000 ? 4 : 5;
}

/** UTF-8 length of `s` as Buffer.write encodes it (a lone surrogate becomes U+FFFD, 3 bytes). */
export function utf8Size(s: string): number {
  let size = s.length;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) continue;
    if (c < 0x800) size += 1;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const next = s.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        // A pair: two UTF-16 units, four bytes.
        size += 2;
        i++;
      } else size += 2;
    } else size += 2;
  }
  return size;
}

/** Low and high 32 bits of an int64 field's value, two's complement for negatives. */
function int64Parts(n: number): [number, number] {
  let v = Number.isFinite(n) ? Math.trunc(n) : 0;
  if (v === 0) return [0, 0];
  const negative = v < 0;
  if (negative) v = -v;
  // Long.fromNumber saturates at ±2^63.
  if (v >= 2 ** 63) return negative ? [0, 0x80000000] : [0xffffffff, 0x7fffffff];
  let lo = (v % TWO_32) >>> 0;
  let hi = Math.floor(v / TWO_32) >>> 0;
  if (negative) {
    lo = (~lo + 1) >>> 0;
    hi = (~hi + (lo === 0 ? 1 : 0)) >>> 0;
  }
  return [lo, hi];
}

/** Bytes of an int64 varint. */
export function int64Size(n: number): number {
  if (n >= 0 && n < TWO_32) return varint32Size(Math.trunc(n) >>> 0);
  const [lo, hi] = int64Parts(n);
  if (hi === 0) return varint32Size(lo);
  let size = 5;
  for (let h = hi >>> 3; h !== 0; h >>>= 7) size++;
  return size;
}

/** A cursor over a buffer allocated at its final size. */
export class ProtoWriter {
  pos = 0;

  constructor(readonly buf: Buffer) {}

  byte(b: number): void {
    this.buf[this.pos++] = b;
  }

  varint32(v: number): void {
    const buf = this.buf;
    let pos = this.pos;
    while (v > 0x7f) {
      buf[pos++] = (v & 0x7f) | 0x80;
      v >>>= 7;
    }
    buf[pos++] = v;
    this.pos = pos;
  }

  int64(n: number): void {
    if (n >= 0 && n < TWO_32) {
      this.varint32(Math.trunc(n) >>> 0);
      return;
    }
    let [lo, hi] = int64Parts(n);
    const buf = this.buf;
    while (hi !== 0 || lo > 0x7f) {
      buf[this.pos++] = (lo & 0x7f) | 0x80;
      lo = ((lo >>> 7) | (hi << 25)) >>> 0;
      hi >>>= 7;
    }
    buf[this.pos++] = lo;
  }

  double(v: number): void {
    this.buf.writeDoubleLE(v, this.pos);
    this.pos += 8;
  }

  /** Writes `s` of UTF-8 size `size` (from utf8Size), without its length prefix. */
  utf8(s: string, size: number): void {
    if (size === s.length) {
      // ASCII: a byte per unit, cheaper than the native call for the short strings written here.
      const buf = this.buf;
      let pos = this.pos;
      for (let i = 0; i < s.length; i++) buf[pos++] = s.charCodeAt(i);
      this.pos = pos;
    } else {
      this.pos += this.buf.write(s, this.pos, size, 'utf8');
    }
  }

  bytes(b: Uint8Array): void {
    this.buf.set(b, this.pos);
    this.pos += b.length;
  }
}
