import * as grpc from '@grpc/grpc-js';
import { errTypeOf, grpcStatusOf } from '../error-status';
import type { HealthState } from '../health';
import type { Logger } from '../log';
import type { ServiceMetrics } from '../metrics/metrics';
import type { RateLimitService } from '../service/rate-limit-service';
import { healthService, type HealthService } from './health-service';
import { loadProtos } from './protos';
import { decodeRateLimitRequest } from '../rls/request-decoder';
import { withRlsServerCodec } from '../rls/rls-service-definition';
import type { RateLimitResponse } from '../service/types';

export interface GrpcServerDeps {
  readonly service: RateLimitService;
  readonly health: HealthState;
  readonly metrics: ServiceMetrics;
  readonly logger: Logger;
  /** Budget for a call that arrives without a deadline. */
  readonly defaultDeadlineMs: number;
  /** GRPC_CLIENT_TLS_SAN: with mTLS, the client certificate must carry this subject alternative name. */
  readonly requiredClientSan?: string;
}

const METHOD = 'ShouldRateLimit';

/** True when the mTLS peer certificate lists `san` among its subject alternative names. */
export function peerHasSan(call: grpc.ServerUnaryCall<unknown, unknown>, san: string): boolean {
  const names = call.getAuthContext().sslPeerCertificate?.subjectaltname;
  if (!names) return false;
  // Node prints them as `DNS:a, IP Address:10.0.0.1, URI:spiffe://x`.
  return names.split(', ').some((entry) => entry.slice(entry.indexOf(':') + 1) === san);
}

function deadlineOf(call: grpc.ServerUnaryCall<unknown, unknown>, fallbackMs: number): number {
  const d = call.getDeadline();
  const ms = d instanceof Date ? d.getTime() : d;
  return Number.isFinite(ms) ? ms : Date.now() + fallbackMs;
}

/** The gRPC transport: RateLimitService and grpc.health.v1 on one server. */
export class GrpcServer {
  private readonly server: grpc.Server;
  private readonly health: HealthService;

  constructor(private readonly deps: GrpcServerDeps) {
    const protos = loadProtos();
    this.server = new grpc.Server({
      // Envoy keeps long-lived HTTP/2 connections; answer its pings promptly.
      'grpc.keepalive_permit_without_calls': 1,
      'grpc.max_receive_message_length': 4 * 1024 * 1024,
      // channelz bookkeeping costs CPU on every call and nothing here reads it.
      'grpc.enable_channelz': 0,
    });
    this.server.addService(withRlsServerCodec(protos.rlsService), { [METHOD]: this.shouldRateLimit });
    this.health = healthService(deps.health);
    this.server.addService(protos.healthService, this.health.handlers);
  }

  /** Binds `address` (`host:port`, `unix:/path`); resolves with the bound port (0 for unix). */
  listen(address: string, credentials: grpc.ServerCredentials = grpc.ServerCredentials.createInsecure()): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.bindAsync(address, credentials, (err, port) => (err ? reject(err) : resolve(port)));
    });
  }

  /** Lets calls in flight finish, up to `graceMs`, then cuts the rest. */
  shutdown(graceMs: number): Promise<void> {
    this.health.endWatches();
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

  private readonly shouldRateLimit = (
    call: grpc.ServerUnaryCall<Buffer, RateLimitResponse>,
    callback: grpc.sendUnaryData<RateLimitResponse>,
  ): void => {
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
    service.shouldRateLimit(request, deadlineOf(call, this.deps.defaultDeadlineMs)).then((response) => {
      metrics.requestDone(METHOD, (performance.now() - started) / 1000);
      if (!call.cancelled) callback(null, response);
    }, fail);
  };
}
