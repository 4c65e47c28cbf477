import * as grpc from '@grpc/grpc-js';
import { errTypeOf, grpcStatusOf } from '../base/error-status';
import type { HealthState } from '../base/health';
import type { Logger } from '../base/log';
import type { ServiceMetrics } from '../metrics/metrics';
import type { RateLimitHandler } from '../service/rate-limit-handler';
import { peerHasSan } from './credentials';
import { healthService, type HealthService } from './health-service';
import { ConnectionGuard, type ConnectionBounds } from './connection-guard';
import { leaveResetLimitToGuard, onEachHttp2Server, routeStreams } from './http2-servers';
import { loadProtos, SERVER_PROTO_LOADER_OPTIONS } from './protos';
import { decodeRateLimitRequest } from '../rls/request-decoder';
import { encodeRateLimitResponse } from '../rls/response-encoder';
import { withRlsServerCodec } from '../rls/rls-service-definition';
import { RLS_PATH, rlsStreamHandler, type StreamHandler } from './rls-stream-handler';

/**
 * Who serves ShouldRateLimit (GRPC_RLS_HANDLER): `http2`, rls-stream-handler.ts straight on
 * node:http2's streams, or `grpc-js`, grpc-js' unary call machinery. Every other method is
 * grpc-js' either way.
 */
export type RlsHandlerKind = 'http2' | 'grpc-js';
export const RLS_HANDLERS: readonly RlsHandlerKind[] = ['http2', 'grpc-js'];
export const DEFAULT_RLS_HANDLER: RlsHandlerKind = 'grpc-js';

/** Bounds on what one gRPC client can make the server hold (GRPC_MAX_*). */
export interface GrpcLimits {
  /** A larger request is refused with RESOURCE_EXHAUSTED before it is decoded. */
  readonly maxReceiveMessageBytes: number;
  /** Advertised in HTTP/2 SETTINGS: calls one connection may have open at once. */
  readonly maxConcurrentStreams: number;
  /** A connection without a call for this long is closed. */
  readonly maxConnectionIdleMs: number;
  /** node:http2's memory bound of one connection, in MiB (GRPC_MAX_SESSION_MEMORY): new calls are refused past it. */
  readonly maxSessionMemoryMb: number;
  /** Connections, the time to receive a request, and resets (see connection-guard.ts). */
  readonly connections: ConnectionBounds;
}

export interface GrpcServerDeps {
  readonly service: RateLimitHandler;
  readonly health: HealthState;
  readonly metrics: ServiceMetrics;
  readonly logger: Logger;
  /** Budget for a call that arrives without a deadline. */
  readonly defaultDeadlineMs: number;
  /** Message size, streams per connection and idle time: what one client can make the server hold. */
  readonly limits: GrpcLimits;
  /** GRPC_MAX_CONNECTION_AGE and _GRACE; grpc-js defaults (no limit) when absent. */
  readonly maxConnectionAgeMs?: number;
  readonly maxConnectionAgeGraceMs?: number;
  /** GRPC_CLIENT_TLS_SAN: with mTLS, the client certificate must carry this subject alternative name. */
  readonly requiredClientSan?: string;
  /** GRPC_RLS_HANDLER; DEFAULT_RLS_HANDLER when absent. */
  readonly rlsHandler?: RlsHandlerKind;
}

const METHOD = 'ShouldRateLimit';

function deadlineOf(call: grpc.ServerUnaryCall<unknown, unknown>, fallbackMs: number): number {
  const d = call.getDeadline();
  const ms = d instanceof Date ? d.getTime() : d;
  return Number.isFinite(ms) ? ms : Date.now() + fallbackMs;
}

/** ShouldRateLimit's node:http2 handler, when GRPC_RLS_HANDLER asks for it. */
function http2RlsHandler(deps: GrpcServerDeps): StreamHandler | undefined {
  if ((deps.rlsHandler ?? DEFAULT_RLS_HANDLER) !== 'http2') return undefined;
  const { service, metrics, logger, defaultDeadlineMs, requiredClientSan } = deps;
  const maxReceiveMessageBytes = deps.limits.maxReceiveMessageBytes;
  return rlsStreamHandler({
    service,
    metrics,
    logger,
    defaultDeadlineMs,
    maxReceiveMessageBytes,
    ...(requiredClientSan !== undefined ? { requiredClientSan } : {}),
  });
}

/** The gRPC transport: RateLimitService and grpc.health.v1 on one server. */
export class GrpcServer {
  private readonly server: grpc.Server;
  private readonly health: HealthService;
  /** The last error of a listening socket: grpc-js reports a failed bind in words only. */
  private listenError: NodeJS.ErrnoException | undefined;
  private readonly guard: ConnectionGuard;

  constructor(private readonly deps: GrpcServerDeps) {
    const protos = loadProtos(SERVER_PROTO_LOADER_OPTIONS);
    this.server = new grpc.Server({
      // Envoy keeps long-lived HTTP/2 connections; answer its pings promptly.
      'grpc.keepalive_permit_without_calls': 1,
      // Checked against the length prefix, before a byte of the message is decoded.
      'grpc.max_receive_message_length': deps.limits.maxReceiveMessageBytes,
      'grpc.max_concurrent_streams': deps.limits.maxConcurrentStreams,
      // Also closes raw connections that never open a stream.
      'grpc.max_connection_idle_ms': deps.limits.maxConnectionIdleMs,
      // grpc-js leaves node's bound off (unlimited) unless asked.
      'grpc-node.max_session_memory': deps.limits.maxSessionMemoryMb,
      // channelz bookkeeping costs CPU on every call and nothing here reads it.
      'grpc.enable_channelz': 0,
      // As the reference: connections are recycled so that load spreads over new pods.
      ...(deps.maxConnectionAgeMs !== undefined ? { 'grpc.max_connection_age_ms': deps.maxConnectionAgeMs } : {}),
      ...(deps.maxConnectionAgeGraceMs !== undefined ? { 'grpc.max_connection_age_grace_ms': deps.maxConnectionAgeGraceMs } : {}),
    });
    this.guard = new ConnectionGuard(deps.limits.connections, {
      onResetFlood: (peer) =>
        deps.logger.warn('gRPC connection closed: too many calls reset before their answer (GRPC_MAX_RESET_BURST)', { peer }),
      onRequestBudgetFull: (resets) =>
        deps.logger.warn('gRPC calls reset: their unfinished requests held GRPC_MAX_UNFINISHED_REQUEST_BYTES, oldest first', { resets }),
      onConnectionsEvicted: (count) =>
        deps.logger.warn(
          'gRPC connections closed to make room for new ones (GRPC_MAX_CONNECTIONS), or without a finished call (GRPC_MAX_FIRST_CALL_TIME)',
          { count },
        ),
    });
    const rlsOnHttp2 = http2RlsHandler(deps);
    onEachHttp2Server(this.server, (http2Server) => {
      http2Server.on('error', (err: NodeJS.ErrnoException) => (this.listenError = err));
      leaveResetLimitToGuard(http2Server);
      // ShouldRateLimit's streams to rls-stream-handler.ts, the rest to grpc-js; the guard below
      // watches sessions and their streams, whoever serves them.
      if (rlsOnHttp2 !== undefined) routeStreams(this.server, http2Server, RLS_PATH, rlsOnHttp2);
      // Every connection starts at GRPC_MAX_CONCURRENT_STREAMS: nghttp2 clients (Envoy) assume 100
      // until the server's SETTINGS arrive and send their first burst at once; fewer refused it
      // (REFUSED_STREAM, which Envoy does not retry). The request budget and
      // GRPC_MAX_FIRST_CALL_TIME bound what a connection that never finishes a call holds.
      this.guard.install(http2Server);
    });
    // With the node:http2 handler every ShouldRateLimit stream goes to it; grpc-js has no handler
    // for the method, so a stream routed wrong would be UNIMPLEMENTED, not served twice.
    if (rlsOnHttp2 === undefined) this.server.addService(withRlsServerCodec(protos.rlsService), { [METHOD]: this.shouldRateLimit });
    this.health = healthService(deps.health);
    this.server.addService(protos.healthService, this.health.handlers);
  }

  /**
   * Binds `address` (`host:port`, `[ipv6]:port`, `unix:/path`); resolves with the bound port (0
   * for unix). A failed bind rejects with the socket's own error (`code` EADDRINUSE...) when there
   * is one, else with grpc-js' (a name that does not resolve).
   */
  listen(address: string, credentials: grpc.ServerCredentials = grpc.ServerCredentials.createInsecure()): Promise<number> {
    return new Promise((resolve, reject) => {
      this.listenError = undefined;
      this.server.bindAsync(address, credentials, (err, port) => (err ? reject(this.listenError ?? err) : resolve(port)));
    });
  }

  /** Lets calls in flight finish, up to `graceMs`, then cuts the rest. */
  shutdown(graceMs: number): Promise<void> {
    this.health.endWatches();
    this.guard.close();
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.server.forceShutdown();
        resolve();
      }, graceMs);
      this.server.tryShutdown(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  private readonly shouldRateLimit = (call: grpc.ServerUnaryCall<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>): void => {
    const { service, metrics, logger } = this.deps;
    const started = performance.now();
    const fail = (err: unknown): void => {
      metrics.requestDone(METHOD, (performance.now() - started) / 1000);
      // The caller has gone away (Envoy resets the stream when the downstream leaves): nothing to answer.
      if (call.cancelled) return;
      metrics.shouldRateLimitError(errTypeOf(err));
      const code = grpcStatusOf(err);
      if (code === grpc.status.INTERNAL) logger.error('ShouldRateLimit failed', { error: String(err) });
      else logger.debug('ShouldRateLimit refused', { error: String(err) });
      callback({ code, details: err instanceof Error ? err.message : String(err) });
    };
    const san = this.deps.requiredClientSan;
    if (san !== undefined && !peerHasSan(call, san)) {
      callback({ code: grpc.status.UNAUTHENTICATED, details: `client certificate does not carry the subject alternative name '${san}'` });
      return;
    }
    let request;
    try {
      request = decodeRateLimitRequest(call.request);
    } catch (err) {
      fail(err);
      return;
    }
    // One chain ending in fail: an error while answering (not only while counting) reaches the
    // caller as a status instead of becoming an unhandled rejection. The answer is encoded here,
    // inside the chain, not in grpc-js' serializer, for the same reason.
    service
      .shouldRateLimit(request, deadlineOf(call, this.deps.defaultDeadlineMs), call.metadata)
      .then((response) => {
        const wire = call.cancelled ? undefined : encodeRateLimitResponse(response);
        metrics.requestDone(METHOD, (performance.now() - started) / 1000);
        if (wire !== undefined) callback(null, wire);
      })
      .catch(fail);
  };
}
