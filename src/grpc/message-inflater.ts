// The request message of a call sent compressed (grpc-encoding gzip or deflate), inflated
// within the message bound. Used by rls-stream-handler.ts; grpc-js inflates the messages of the
// methods it serves itself.
import { gunzip, inflate, type InputType, type ZlibOptions } from 'node:zlib';

/** The encodings a call may send its message in, besides identity (as grpc-js' server). */
export type MessageEncoding = 'gzip' | 'deflate';

type Inflate = (buf: InputType, options: ZlibOptions, callback: (error: Error | null, result: Buffer) => void) => void;

/**
 * `message` inflated, at most `maxBytes` of it: rejects with code ERR_BUFFER_TOO_LARGE past
 * that (zlib stops there), or with zlib's error when the bytes are not of the encoding.
 * On node's thread pool, as grpc-js' zlib streams: inflating on the event loop held it for
 * every call (a 32 KB gzip message inflating to a 16 MiB bound: 10-20 ms each).
 */
export function inflateMessage(encoding: MessageEncoding, message: Buffer, maxBytes: number): Promise<Buffer> {
  const run: Inflate = encoding === 'gzip' ? gunzip : inflate;
  return new Promise((resolve, reject) => {
    run(message, { maxOutputLength: maxBytes }, (error, result) => {
      if (error === null) resolve(result);
      else reject(error);
    });
  });
}

interface Waiting {
  readonly encoding: MessageEncoding;
  readonly message: Buffer;
  readonly maxBytes: number;
  readonly wanted: () => boolean;
  readonly resolve: (bytes: Buffer | undefined) => void;
  readonly reject: (err: unknown) => void;
}

/**
 * Inflates at most `concurrency` messages at a time, the others waiting their turn in order.
 * Each inflation may hold up to the message bound before it is refused, so many at once were
 * many times the bound: 64 gzip messages of 32 KB at once, 16 MiB bound, took RSS from 103 MB to
 * 1.18 GB (grpc-js' own path: 1.16 GB); inflated one at a time on the event loop, 208 MB.
 */
export class MessageInflater {
  private active = 0;
  private readonly queue: Waiting[] = [];

  constructor(private readonly concurrency: number) {}

  /** Inflating now. */
  get running(): number {
    return this.active;
  }

  /** Waiting their turn. */
  get waiting(): number {
    return this.queue.length;
  }

  /**
   * As inflateMessage, in turn; undefined, without inflating, when `wanted()` says false as its
   * turn comes (the call answered at its deadline or reset while it waited).
   */
  inflate(encoding: MessageEncoding, message: Buffer, maxBytes: number, wanted: () => boolean): Promise<Buffer | undefined> {
    return new Promise((resolve, reject) => {
      this.queue.push({ encoding, message, maxBytes, wanted, resolve, reject });
      this.next();
    });
  }

  private next(): void {
    while (this.active < this.concurrency) {
      const job = this.queue.shift();
      if (job === undefined) return;
      if (!job.wanted()) {
        job.resolve(undefined);
        continue;
      }
      this.active++;
      inflateMessage(job.encoding, job.message, job.maxBytes).then(
        (bytes) => this.done(() => job.resolve(bytes)),
        (err: unknown) => this.done(() => job.reject(err)),
      );
    }
  }

  private done(settle: () => void): void {
    this.active--;
    settle();
    this.next();
  }
}
