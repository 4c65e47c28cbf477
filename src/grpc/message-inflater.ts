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
