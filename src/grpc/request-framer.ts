// gRPC's length-prefixed message framing (a flag byte, a 4-byte big-endian length, the message),
// read side, for a unary request: the one message, however the DATA frames cut it. Used by
// rls-stream-handler.ts; grpc-js' StreamDecoder does the same for the methods grpc-js serves.

/** push: nothing wrong so far (the message may be whole or still arriving). */
export const FRAMED = 0;
/** push: a prefix declares more than the bound; `refusedBytes` says how much. */
export const TOO_LARGE = 1;
/**
 * push: a second message has arrived whole, which a unary call does not take. As grpc-js'
 * StreamDecoder: bytes after the message that are not yet a whole frame (prefix and declared
 * length) are no message, and a request that ends there is answered on its first message.
 */
export const SECOND_MESSAGE = 2;

const PREFIX_BYTES = 5;

/**
 * One request's message. An ordinary request arrives whole in one chunk and is taken as a view
 * of it, without a copy; a message cut across chunks is copied once into a buffer of its
 * declared size, allocated only after the size has been checked against the bound.
 */
export class RequestFramer {
  /** The message, once it has arrived whole. */
  message: Buffer | undefined;
  /** The flag byte of the message said compressed (1). */
  compressed = false;
  /** The length the prefix declared, once read. */
  declaredBytes = -1;
  /** The length a prefix declared past the bound (the message's, or one after it), once refused. */
  refusedBytes = -1;
  /** The prefix while it arrives in pieces (rare). */
  private prefix: Buffer | undefined;
  private prefixFilled = 0;
  /** The message while it arrives in pieces. */
  private body: Buffer | undefined;
  private bodyFilled = 0;
  /** After the message: the prefix of the frame that follows, while it arrives (it is not kept). */
  private nextPrefix: Buffer | undefined;
  private nextPrefixFilled = 0;
  /** After the message: the bytes still to come of the frame that follows, once its prefix is read. */
  private nextRemaining = 0;

  constructor(private readonly maxBytes: number) {}

  /** Takes the next chunk of the request's DATA: FRAMED, TOO_LARGE or SECOND_MESSAGE. */
  push(chunk: Buffer): number {
    // Refused once, refused for good: nothing of it is held.
    if (this.refusedBytes >= 0) return TOO_LARGE;
    if (this.message !== undefined) return this.skipFrames(chunk, 0);
    let at = 0;
    if (this.declaredBytes < 0) {
      // The usual case: the whole prefix in this chunk, nothing of it before.
      if (this.prefixFilled === 0 && chunk.length >= PREFIX_BYTES) {
        if (!this.declare(chunk[0] === 1, chunk.readUInt32BE(1))) return TOO_LARGE;
        at = PREFIX_BYTES;
      } else {
        at = this.fillPrefix(chunk);
        if (this.prefixFilled < PREFIX_BYTES) return FRAMED;
        const prefix = this.prefix as Buffer;
        if (!this.declare(prefix[0] === 1, prefix.readUInt32BE(1))) return TOO_LARGE;
      }
    }
    return this.takeBody(chunk, at);
  }

  private fillPrefix(chunk: Buffer): number {
    this.prefix ??= Buffer.alloc(PREFIX_BYTES);
    const n = Math.min(PREFIX_BYTES - this.prefixFilled, chunk.length);
    chunk.copy(this.prefix, this.prefixFilled, 0, n);
    this.prefixFilled += n;
    return n;
  }

  private declare(compressed: boolean, length: number): boolean {
    this.compressed = compressed;
    this.declaredBytes = length;
    if (length <= this.maxBytes) return true;
    this.refusedBytes = length;
    return false;
  }

  /** The message's bytes from `chunk[at]` on. */
  private takeBody(chunk: Buffer, at: number): number {
    const length = this.declaredBytes;
    const available = chunk.length - at;
    if (this.body === undefined) {
      if (available >= length) {
        this.message = chunk.subarray(at, at + length);
        return this.skipFrames(chunk, at + length);
      }
      this.body = Buffer.allocUnsafe(length);
    }
    const n = Math.min(length - this.bodyFilled, available);
    chunk.copy(this.body, this.bodyFilled, at, at + n);
    this.bodyFilled += n;
    if (this.bodyFilled < length) return FRAMED;
    this.message = this.body;
    return this.skipFrames(chunk, at + n);
  }

  /**
   * The frames after the message, from `chunk[at]` on: counted, not kept. As grpc-js, which
   * decodes a whole chunk before it delivers any of it: a length over the bound anywhere in the
   * chunk is TOO_LARGE, even after a whole second message.
   */
  private skipFrames(chunk: Buffer, at: number): number {
    let second = false;
    while (at < chunk.length) {
      if (this.nextRemaining > 0) {
        const n = Math.min(this.nextRemaining, chunk.length - at);
        this.nextRemaining -= n;
        at += n;
        second ||= this.nextRemaining === 0;
        continue;
      }
      this.nextPrefix ??= Buffer.alloc(PREFIX_BYTES);
      const n = Math.min(PREFIX_BYTES - this.nextPrefixFilled, chunk.length - at);
      chunk.copy(this.nextPrefix, this.nextPrefixFilled, at, at + n);
      this.nextPrefixFilled += n;
      at += n;
      if (this.nextPrefixFilled < PREFIX_BYTES) break;
      this.nextPrefixFilled = 0;
      const length = this.nextPrefix.readUInt32BE(1);
      if (length > this.maxBytes) {
        this.refusedBytes = length;
        return TOO_LARGE;
      }
      this.nextRemaining = length;
      second ||= length === 0;
    }
    return second ? SECOND_MESSAGE : FRAMED;
  }
}
