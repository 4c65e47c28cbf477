import type { Http2SecureServer, Http2Server } from 'node:http2';
import type * as grpc from '@grpc/grpc-js';

/** The node:http2 server grpc-js builds for one listening address (TLS or not). */
export type GrpcHttp2Server = Http2Server | Http2SecureServer;

interface GrpcServerInternals {
  createHttp2Server?: (credentials: grpc.ServerCredentials) => GrpcHttp2Server;
}

/**
 * Calls `hook` with every node:http2 server `server` creates, before it listens. grpc-js hands
 * none of them out, and the bounds floodgate needs live there: connections per port, resets and
 * unfinished requests per connection (node 20 has no option for RST_STREAM rates, and grpc-js
 * none for the rest). This is the one place that reaches into grpc-js (its private
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
