import type { Http2SecureServer, Http2Server, IncomingHttpHeaders, ServerHttp2Stream } from 'node:http2';
import type * as grpc from '@grpc/grpc-js';

/** The node:http2 server grpc-js builds for one listening address (TLS or not). */
export type GrpcHttp2Server = Http2Server | Http2SecureServer;

interface GrpcServerInternals {
  createHttp2Server?: (credentials: grpc.ServerCredentials) => GrpcHttp2Server;
  /** Counts a stream as a call of its session for GRPC_MAX_CONNECTION_IDLE, until it closes. */
  onStreamOpened?: (stream: ServerHttp2Stream) => void;
}

/**
 * Calls `hook` with every node:http2 server `server` creates, before it listens. grpc-js hands
 * none of them out, and the bounds floodgate needs live there: connections per port, resets and
 * unfinished requests per connection (node 20 has no
 * option for RST_STREAM rates, and grpc-js none for the rest). This is the one place that reaches into grpc-js (its private
 * `createHttp2Server`, in every 1.x release); should a release rename it, the server refuses to
 * start rather than run without its bounds, and test/e2e/grpc-connection-bounds.test.ts fails.
 */
export function onEachHttp2Server(server: grpc.Server, hook: (http2Server: GrpcHttp2Server) => void): void {
  const internals = server as unknown as GrpcServerInternals;
  const create = internals.createHttp2Server;
  if (typeof create !== 'function') {
    throw new Error('this @grpc/grpc-js has no Server.createHttp2Server: the gRPC connection bounds cannot be installed');
  }
  internals.createHttp2Server = (credentials) => {
    const http2Server = create.call(server, credentials);
    hook(http2Server);
    return http2Server;
  };
}

type StreamListener = (stream: ServerHttp2Stream, headers: IncomingHttpHeaders, flags: number, rawHeaders: string[]) => void;

/**
 * Hands the streams of `path` on `http2Server` (one grpc-js created, given to the hook of
 * onEachHttp2Server) to `handler`, and every other stream to grpc-js' own listener as before.
 * grpc-js' listener is taken off the server and called by the one put in its place, so a stream
 * goes to one of them only. A stream the handler takes still counts as a call of its session for
 * grpc.max_connection_idle_ms, through grpc-js' private `onStreamOpened`, which grpc-js calls for
 * each of its own streams; should a release rename it, the server refuses to start, as for
 * `createHttp2Server`.
 */
export function routeStreams(
  server: grpc.Server,
  http2Server: GrpcHttp2Server,
  path: string,
  handler: (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => void,
): void {
  const opened = (server as unknown as GrpcServerInternals).onStreamOpened;
  if (typeof opened !== 'function') {
    throw new Error('this @grpc/grpc-js has no Server.onStreamOpened: its idle bound would not see the calls served on node:http2');
  }
  const grpcListeners = http2Server.listeners('stream') as StreamListener[];
  if (grpcListeners.length !== 1) throw new Error(`grpc-js set ${grpcListeners.length} 'stream' listeners on its node:http2 server, not 1`);
  const grpcListener = grpcListeners[0] as StreamListener;
  http2Server.removeListener('stream', grpcListener);
  http2Server.on('stream', (stream: ServerHttp2Stream, headers: IncomingHttpHeaders, flags: number, rawHeaders: string[]) => {
    if (headers[':path'] === path) {
      opened.call(server, stream);
      handler(stream, headers);
    } else {
      grpcListener.call(http2Server, stream, headers, flags, rawHeaders);
    }
  });
}

/**
 * nghttp2's own RST_STREAM rate limit (1000 at once, then 33 a second, per connection) closes a
 * connection with INTERNAL_ERROR and fails every call on it. A client that cancels calls at its
 * own deadline (Envoy at its 20 ms timeout, while Redis is slow) trips it, so floodgate replaces it
 * with its own guard, which counts only resets made before the call's deadline
 * (connection-guard.ts). node:http2 reads these options when each connection starts, from the
 * server's private options object (the `streamResetBurst` and `streamResetRate` server options,
 * which grpc-js has no way to pass).
 */
export function leaveResetLimitToGuard(http2Server: GrpcHttp2Server): void {
  const options = serverOptions(http2Server, "nghttp2's reset limit cannot be handed to the guard");
  options['streamResetBurst'] = UNLIMITED_RESETS;
  options['streamResetRate'] = UNLIMITED_RESETS;
}

function serverOptions(http2Server: GrpcHttp2Server, consequence: string): Record<string, unknown> {
  const key = Object.getOwnPropertySymbols(http2Server).find((symbol) => symbol.description === 'options');
  const options = key === undefined ? undefined : (http2Server as unknown as Record<symbol, Record<string, unknown> | undefined>)[key];
  if (options === undefined) throw new Error(`this node:http2 keeps no server options: ${consequence}`);
  return options;
}

/** As many resets as nghttp2 can count: its limit is off, the guard's applies. */
const UNLIMITED_RESETS = 2 ** 31 - 1;
