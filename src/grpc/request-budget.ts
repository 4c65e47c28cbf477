import type { Http2Session, ServerHttp2Stream } from 'node:http2';

/**
 * The bytes of gRPC requests still arriving, counted across every connection of the process
 * (GRPC_MAX_UNFINISHED_REQUEST_BYTES; issue 26, finding 1). grpc-js keeps the bytes of a message
 * in its JavaScript decoder until the message is whole, where nghttp2's session accounting
 * (GRPC_MAX_SESSION_MEMORY) never sees them: 256 connections × 100 streams each holding 65,535
 * bytes of a declared 65,536 took the process to 750 MB.
 *
 * A stream counts from its HEADERS until its request has arrived (END_STREAM) or it closes:
 * STREAM_CHARGE_BYTES for the stream itself, and its bytes as they come. The stream alone is
 * most of the cost of a call that sends little: 25,600 open calls that sent only their HEADERS
 * (256 connections × 100 streams) took the process from 95 to 280 MB, about 7 KB each. When a chunk would take the total over the budget, room is made by resetting the
 * streams that have been arriving longest: an ordinary request arrives whole in one read and
 * leaves at once, so it is the newest and is kept, while a client that holds partial messages
 * open loses its oldest ones (RST_STREAM ENHANCE_YOUR_CALM, which gRPC clients report as
 * RESOURCE_EXHAUSTED). Refusing the newest instead would let one client that fills the budget
 * refuse every other client's request.
 */
/**
 * What an open call is counted for besides its bytes: grpc-js' call, node's stream, nghttp2's
 * (measured about 7 KB), and the garbage it leaves when reset, which waits for a GC.
 */
export const STREAM_CHARGE_BYTES = 16 * 1024;

/** A gRPC message's prefix: a flag byte and a 4-byte length. */
const PREFIX_BYTES = 5;

export class RequestBudget {
  /** Bytes counted now, over every stream in `receiving`. */
  private held = 0;
  /**
   * Each stream whose request is arriving, with its bytes so far. Insertion order is the order
   * of first bytes, so the first entry is the request that has been arriving longest.
   */
  private readonly receiving = new Map<ServerHttp2Stream, number>();
  /** For each stream in `receiving` whose first bytes have come: the bytes its length prefix announces, prefix included. */
  private readonly declared = new Map<ServerHttp2Stream, number>();
  /** Streams reset to make room since `takeResets` was last called. */
  private resets = 0;
  /** The 'data' listener of every stream (`this` is the stream): one function, no closure per call. */
  readonly onData: (this: ServerHttp2Stream, chunk: Buffer) => void;

  constructor(
    private readonly maxBytes: number,
    /** Resets a stream to make room (the guard's own reset, not counted as the client's). */
    private readonly reset: (stream: ServerHttp2Stream, bytes: number) => void,
  ) {
    const declared = this.declared;
    const receiving = this.receiving;
    const add = (stream: ServerHttp2Stream, bytes: number): void => this.add(stream, bytes);
    this.onData = function (this: ServerHttp2Stream, chunk: Buffer): void {
      if (receiving.get(this) === STREAM_CHARGE_BYTES && chunk.length >= PREFIX_BYTES) declared.set(this, PREFIX_BYTES + chunk.readUInt32BE(1));
      add(this, chunk.length);
    };
  }

  /** Bytes of unfinished requests counted now. */
  get heldBytes(): number {
    return this.held;
  }

  /** A stream whose request has not arrived yet: it counts STREAM_CHARGE_BYTES before any of its bytes. */
  open(stream: ServerHttp2Stream): void {
    this.add(stream, STREAM_CHARGE_BYTES);
  }

  /**
   * The request of `stream` has arrived whole (END_STREAM read) as one gRPC message of the length
   * its prefix announced: what a client sends, not a slot holder. Asked before `release`.
   */
  arrivedWhole(stream: ServerHttp2Stream): boolean {
    const declared = this.declared.get(stream);
    const bytes = this.receiving.get(stream);
    return declared !== undefined && bytes === STREAM_CHARGE_BYTES + declared && arrived(stream);
  }

  /** The stream closed: its bytes no longer count. */
  release(stream: ServerHttp2Stream): void {
    const bytes = this.receiving.get(stream);
    if (bytes === undefined) return;
    this.receiving.delete(stream);
    this.declared.delete(stream);
    this.held -= bytes;
  }

  /**
   * Resets every stream of `session` whose request is still arriving (its connection is being
   * closed to make room): they go at once, and with them what they hold.
   */
  dropSession(session: Http2Session): void {
    for (const [stream, bytes] of this.receiving) {
      if (stream.session !== session) continue;
      this.receiving.delete(stream);
      this.declared.delete(stream);
      this.held -= bytes;
      if (arrived(stream) || stream.destroyed) continue;
      this.resets++;
      this.reset(stream, bytes);
    }
  }

  /** Bytes counted now for the requests of `session` still arriving. Bounded work: at most maxBytes / STREAM_CHARGE_BYTES entries. */
  sessionBytes(session: Http2Session): number {
    let total = 0;
    for (const [stream, bytes] of this.receiving) if (stream.session === session) total += bytes;
    return total;
  }

  /** How many streams were reset to make room since the last call. */
  takeResets(): number {
    const n = this.resets;
    this.resets = 0;
    return n;
  }

  clear(): void {
    this.receiving.clear();
    this.declared.clear();
    this.held = 0;
  }

  private add(stream: ServerHttp2Stream, bytes: number): void {
    const before = this.receiving.get(stream);
    this.receiving.set(stream, before === undefined ? bytes : before + bytes);
    this.held += bytes;
    if (this.held > this.maxBytes) this.makeRoom();
  }

  /**
   * Oldest first: a stream whose request has meanwhile arrived whole (END_STREAM read) only
   * leaves the count, since it is no longer in progress; one still arriving is reset. The stream
   * whose chunk overran the budget is among them, last, if nothing older gives enough room.
   */
  private makeRoom(): void {
    for (const [stream, bytes] of this.receiving) {
      if (this.held <= this.maxBytes) return;
      this.receiving.delete(stream);
      this.declared.delete(stream);
      this.held -= bytes;
      if (arrived(stream) || stream.destroyed) continue;
      this.resets++;
      this.reset(stream, bytes);
    }
  }
}

/**
 * END_STREAM has been read for `stream`, whether or not grpc-js has consumed it yet ('end',
 * readableEnded, comes only once it has: grpc-js pauses a stream between a message and its
 * handler's next read, and an ordinary call waiting there is no request in progress).
 */
function arrived(stream: ServerHttp2Stream): boolean {
  return (stream as unknown as { _readableState: { ended: boolean } })._readableState.ended;
}
