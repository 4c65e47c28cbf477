import { isUtf8 } from 'node:buffer';
import { InvalidRequestError } from '../base/errors';

// The protobuf wire format, read side, for the few fields floodgate decodes by hand
// (request-decoder.ts). Every read is bounded by the buffer, so a malformed message ends in a
// MalformedMessageError (INVALID_ARGUMENT), never in a read past the end or a crash. What is
// malformed is what protobuf-go, the reference's decoder, refuses: a varint past 64 bits, a
// field number outside 1 to 2^29 - 1, a string field that is not UTF-8
// (test/integration/rls-codec-protobuf-go.test.ts compares the two).

export const WIRE_VARINT = 0;
export const WIRE_FIXED64 = 1;
export const WIRE_LEN = 2;
export const WIRE_START_GROUP = 3;
export const WIRE_END_GROUP = 4;
export const WIRE_FIXED32 = 5;

/** Up to this many bytes an ASCII string is decoded in JS (see ProtoReader.string). */
const SHORT_STRING_BYTES = 12;

/** Groups are long deprecated; an unknown one is skipped, but not nested without bound. */
const MAX_GROUP_DEPTH = 32;

/** The largest field number of a message's own fields (2^29 - 1). */
const MAX_FIELD_NUMBER = 0x1fffffff;
/** Inside a group protobuf-go reads field numbers up to 2^31 - 1 (protowire.ConsumeTag). */
const MAX_GROUP_FIELD_NUMBER = 0x7fffffff;

/** The bytes are not a well-formed protobuf message. */
export class MalformedMessageError extends InvalidRequestError {}

export class ProtoReader {
  pos = 0;

  constructor(readonly buf: Buffer) {}

  private malformed(what: string): never {
    throw new MalformedMessageError(`malformed RateLimitRequest: ${what} at byte ${this.pos}`);
  }

  /** A varint's low 32 bits, unsigned (uint32). Longer varints are read to their end. */
  uint32(): number {
    const buf = this.buf;
    let pos = this.pos;
    let value = 0;
    for (let i = 0; i < 9; i++) {
      if (pos >= buf.length) this.malformed('truncated varint');
      const b = buf[pos++] as number;
      if (i < 5) value |= (b & 0x7f) << (7 * i);
      if (b < 0x80) {
        this.pos = pos;
        return value >>> 0;
      }
    }
    this.pos = pos;
    this.tenthVarintByte();
    return value >>> 0;
  }

  /** The tenth byte of a varint carries bit 63 only: anything more overflows 64 bits. */
  private tenthVarintByte(): void {
    if (this.pos >= this.buf.length) this.malformed('truncated varint');
    if ((this.buf[this.pos] as number) > 1) this.malformed('varint overflows 64 bits');
    this.pos++;
  }

  /**
   * A field's tag (field number << 3 | wire type) in a message: below 2^32, refused when its
   * field number is 0 or past 2^29 - 1, as protobuf-go refuses it.
   */
  tag(): number {
    const pos = this.pos;
    // Every tag of a RateLimitRequest's own fields is one byte.
    if (pos < this.buf.length) {
      const b = this.buf[pos] as number;
      if (b >= 8 && b < 0x80) {
        this.pos = pos + 1;
        return b;
      }
    }
    return this.checkedTag(MAX_FIELD_NUMBER);
  }

  /** A tag inside a group, where protobuf-go reads field numbers up to 2^31 - 1 (and so tags past 2^32). */
  private groupTag(): number {
    return this.checkedTag(MAX_GROUP_FIELD_NUMBER);
  }

  private checkedTag(maxField: number): number {
    const tag = this.uint64();
    const field = Math.floor(tag / 8);
    if (field === 0) this.malformed('field number 0');
    if (field > maxField) this.malformed(`field number ${field} out of range`);
    return tag;
  }

  /** A varint's low 32 bits, signed (int32 and enums: -1 arrives as ten bytes). */
  int32(): number {
    return this.uint32() | 0;
  }

  /** A uint64 varint as a number (exact up to 2^53, as protobufjs' Long.toNumber gives it). */
  uint64(): number {
    const buf = this.buf;
    let pos = this.pos;
    let lo = 0;
    let hi = 0;
    for (let i = 0; i < 9; i++) {
      if (pos >= buf.length) this.malformed('truncated varint');
      const b = buf[pos++] as number;
      if (i < 4) lo |= (b & 0x7f) << (7 * i);
      else if (i === 4) {
        lo |= (b & 0x0f) << 28;
        hi |= (b & 0x7f) >> 4;
      } else hi |= (b & 0x7f) << (7 * i - 32);
      if (b < 0x80) {
        this.pos = pos;
        return (hi >>> 0) * 4294967296 + (lo >>> 0);
      }
    }
    this.pos = pos;
    if (this.buf[pos] === 1) hi |= 1 << 31;
    this.tenthVarintByte();
    return (hi >>> 0) * 4294967296 + (lo >>> 0);
  }

  /** Reads a length prefix (all 64 bits of it) and returns where that field ends (checked against the buffer). */
  lengthEnd(): number {
    const pos = this.pos;
    let length: number;
    // Most lengths are one byte; this keeps them (and `pos`) small integers.
    if (pos < this.buf.length && (this.buf[pos] as number) < 0x80) {
      length = this.buf[pos] as number;
      this.pos = pos + 1;
    } else length = this.uint64();
    const end = this.pos + length;
    if (end > this.buf.length) this.malformed(`length ${length} past the end of the message`);
    return end;
  }

  /**
   * A length-delimited string field. Bytes that are not UTF-8 are refused, as protobuf-go
   * refuses them: read with replacement characters, distinct values (Latin-1 J\xF6rg and
   * J\xFCrg) would become one (J\uFFFDrg), and share a counter.
   */
  string(): string {
    const end = this.lengthEnd();
    const start = this.pos;
    const buf = this.buf;
    if (end - start <= SHORT_STRING_BYTES) {
      // Descriptor keys and values are mostly short ASCII: built here, they skip the native
      // call, which costs more than the string itself at this size.
      let s = '';
      for (let i = start; i < end; i++) {
        const b = buf[i] as number;
        if (b >= 0x80) return this.utf8(start, end);
        s += String.fromCharCode(b);
      }
      this.pos = end;
      return s;
    }
    return this.utf8(start, end);
  }

  private utf8(start: number, end: number): string {
    const s = this.buf.toString('utf8', start, end);
    // The decoder puts U+FFFD wherever the bytes are not UTF-8, so a string without one was
    // valid; one with U+FFFD (which the caller may also have sent) is checked exactly. On a
    // string of one-byte characters, V8 answers this search without a scan.
    if (s.includes('\uFFFD') && !isUtf8(this.buf.subarray(start, end))) this.malformed('string field contains invalid UTF-8');
    this.pos = end;
    return s;
  }

  /** Checks that a sub-message ended exactly at its length. */
  expectEnd(end: number): void {
    if (this.pos !== end) this.malformed('field runs past the end of its sub-message');
  }

  /**
   * Skips the value of a field floodgate does not read (unknown fields, other wire types).
   * `tag` is one that tag() read: inside a group it may be past 2^32, hence no bit operators.
   */
  skip(tag: number, depth = 0): void {
    switch (tag % 8) {
      case WIRE_VARINT:
        this.uint64();
        return;
      case WIRE_FIXED64:
        this.advance(8);
        return;
      case WIRE_LEN:
        this.pos = this.lengthEnd();
        return;
      case WIRE_START_GROUP: {
        if (depth >= MAX_GROUP_DEPTH) this.malformed('groups nested too deeply');
        for (;;) {
          if (this.pos >= this.buf.length) this.malformed('unterminated group');
          const inner = this.groupTag();
          if (inner % 8 === WIRE_END_GROUP) {
            if (Math.floor(inner / 8) !== Math.floor(tag / 8)) this.malformed('mismatched end group');
            return;
          }
          this.skip(inner, depth + 1);
        }
      }
      case WIRE_FIXED32:
        this.advance(4);
        return;
      default:
        this.malformed(`invalid wire type ${tag % 8}`);
    }
  }

  private advance(n: number): void {
    if (this.pos + n > this.buf.length) this.malformed('truncated fixed-width field');
    this.pos += n;
  }
}
