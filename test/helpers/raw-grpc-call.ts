// A gRPC call made frame by frame with node:http2's client: what a test needs to send what no
// gRPC client would (a message cut anywhere, two messages, no END_STREAM) and to see the answer
// as it is on the wire.
import type { ClientHttp2Session, IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http2';

/** A gRPC length-prefixed message: `flag` (1: compressed), the length, `body`. */
export function grpcFrame(body: Buffer, flag = 0): Buffer {
  const prefix = Buffer.alloc(5);
  prefix[0] = flag;
  prefix.writeUInt32BE(body.length, 1);
  return Buffer.concat([prefix, body]);
}

export interface RawAnswer {
  headers: IncomingHttpHeaders;
  trailers: IncomingHttpHeaders | undefined;
  body: Buffer;
  /** grpc-status, from the trailers or from a Trailers-Only answer's headers. */
  status: number | undefined;
  message: string | undefined;
}

export interface RawSend {
  path: string;
  headers?: OutgoingHttpHeaders;
  chunks: Buffer[];
  /** Send END_STREAM after the chunks (default true). */
  end?: boolean;
}

/** One call on `session` to `path`; resolves at the answer's end (or the stream's close). */
export function rawGrpcCall(session: ClientHttp2Session, { path, headers = {}, chunks, end = true }: RawSend): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const req = session.request({
      ':method': 'POST',
      ':path': path,
      'content-type': 'application/grpc',
      te: 'trailers',
      ...headers,
    });
    let responseHeaders: IncomingHttpHeaders = {};
    let trailers: IncomingHttpHeaders | undefined;
    const body: Buffer[] = [];
    req.on('response', (h) => {
      responseHeaders = h;
    });
    req.on('trailers', (t: IncomingHttpHeaders) => {
      trailers = t;
    });
    req.on('data', (d: Buffer) => body.push(d));
    req.on('error', reject);
    let settled = false;
    // At the answer's END_STREAM, even when the client has not ended its side (a refusal before
    // the request has arrived), or at a reset.
    const settle = (): void => {
      if (settled) return;
      settled = true;
      const last = trailers ?? responseHeaders;
      const status = last['grpc-status'];
      const message = last['grpc-message'];
      resolve({
        headers: responseHeaders,
        trailers,
        body: Buffer.concat(body),
        status: status === undefined ? undefined : Number(status),
        message: typeof message === 'string' ? decodeURIComponent(message) : undefined,
      });
      if (!req.closed) req.close();
    };
    req.on('end', settle);
    req.on('close', settle);
    // Each chunk its own write, on its own turn of the loop: node sends each as DATA frames.
    const write = (i: number): void => {
      if (i === chunks.length) {
        if (end) req.end();
        return;
      }
      req.write(chunks[i], () => setTimeout(() => write(i + 1), 5));
    };
    write(0);
  });
}
