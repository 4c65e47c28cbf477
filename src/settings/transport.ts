import { SettingsError } from '../base/errors';
import type { GrpcTls } from '../grpc/credentials';
import { DEFAULT_RLS_HANDLER, RLS_HANDLERS, type GrpcLimits, type RlsHandlerKind } from '../grpc/grpc-server';
import type { HttpLimits } from '../http/http-listener';
import { bool, duration, int, oneOf, positiveDuration, str, type Env } from './parse';

// The gRPC and HTTP servers' settings: TLS, the bounds on what a caller may make them hold, headers.

/** GRPC_SERVER_USE_TLS and its files; undefined when gRPC serves plaintext. */
export function grpcTls(env: Env): GrpcTls | undefined {
  const clientCaCert = str(env, 'GRPC_CLIENT_TLS_CACERT', '') || undefined;
  const clientSan = str(env, 'GRPC_CLIENT_TLS_SAN', '') || undefined;
  if (!bool(env, 'GRPC_SERVER_USE_TLS', false)) {
    // Serving plaintext while the operator asked for client certificates would be a silent hole.
    const asked = clientCaCert ? 'GRPC_CLIENT_TLS_CACERT' : clientSan ? 'GRPC_CLIENT_TLS_SAN' : undefined;
    if (asked) throw new SettingsError(`invalid settings: ${asked} is set but GRPC_SERVER_USE_TLS is not true, so gRPC would serve plaintext`);
    return undefined;
  }
  const cert = str(env, 'GRPC_SERVER_TLS_CERT', '');
  const key = str(env, 'GRPC_SERVER_TLS_KEY', '');
  if (!cert || !key) {
    throw new SettingsError(`invalid value for GRPC_SERVER_TLS_CERT/GRPC_SERVER_TLS_KEY: both are required when GRPC_SERVER_USE_TLS is true`);
  }
  if (clientSan && !clientCaCert) {
    throw new SettingsError(
      `invalid settings: GRPC_CLIENT_TLS_SAN is set without GRPC_CLIENT_TLS_CACERT, so no client certificate could carry it`,
    );
  }
  return Object.freeze({ cert, key, ...(clientCaCert ? { clientCaCert } : {}), ...(clientSan ? { clientSan } : {}) });
}

// 64 KiB holds any request Envoy sends (a few descriptors of short values) many times over,
// while a 4 MiB message of empty descriptors took 600 MB and 1.4 s to decode.
const DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024;
// Requests arrive whole in one read (a few hundred bytes) and leave the count at once; 8 MiB is
// 512 calls whose requests are arriving at the same moment (each counts 16 KiB besides its
// bytes), or 100 of the largest size, and what a client holding partial messages open can make
// the process hold (issue 26: 750 MB without it; 181-190 MiB with it, 202-210 at 16 MiB).
const DEFAULT_MAX_UNFINISHED_REQUEST_BYTES = 8 * 1024 * 1024;

export function grpcLimits(env: Env): GrpcLimits {
  const idleMs = duration(env, 'GRPC_MAX_CONNECTION_IDLE', 60_000);
  if (idleMs < 1 || idleMs > 24 * 3_600_000) {
    throw new SettingsError(
      `invalid value for GRPC_MAX_CONNECTION_IDLE: '${env.GRPC_MAX_CONNECTION_IDLE}' (expected a duration from 1ms to 24h)`,
    );
  }
  const receiveMs = duration(env, 'GRPC_MAX_REQUEST_RECEIVE_TIME', 10_000);
  if (receiveMs < 1 || receiveMs > 3_600_000) {
    throw new SettingsError(
      `invalid value for GRPC_MAX_REQUEST_RECEIVE_TIME: '${env.GRPC_MAX_REQUEST_RECEIVE_TIME}' (expected a duration from 1ms to 1h)`,
    );
  }
  const firstCallMs = duration(env, 'GRPC_MAX_FIRST_CALL_TIME', 10_000);
  if (firstCallMs < 1 || firstCallMs > 3_600_000) {
    throw new SettingsError(
      `invalid value for GRPC_MAX_FIRST_CALL_TIME: '${env.GRPC_MAX_FIRST_CALL_TIME}' (expected a duration from 1ms to 1h)`,
    );
  }
  const maxReceiveMessageBytes = int(env, 'GRPC_MAX_RECEIVE_MESSAGE_BYTES', DEFAULT_MAX_MESSAGE_BYTES, 1024, 16 * 1024 * 1024);
  // One message of the largest size, with its 5-byte prefix, must fit. Left at its default, the
  // budget follows a raised message size (two of the largest fit), so raising one setting never
  // makes the other refuse the start.
  const defaultBudget = Math.max(DEFAULT_MAX_UNFINISHED_REQUEST_BYTES, 2 * (maxReceiveMessageBytes + 5));
  const maxUnfinishedRequestBytes = int(env, 'GRPC_MAX_UNFINISHED_REQUEST_BYTES', defaultBudget, 1024, 2 ** 31);
  if (maxUnfinishedRequestBytes < maxReceiveMessageBytes + 5) {
    throw new SettingsError(
      `invalid value for GRPC_MAX_UNFINISHED_REQUEST_BYTES: '${maxUnfinishedRequestBytes}' (must be at least GRPC_MAX_RECEIVE_MESSAGE_BYTES + 5, ${maxReceiveMessageBytes + 5})`,
    );
  }
  return Object.freeze({
    maxReceiveMessageBytes,
    // 100 calls in progress per connection is more than Envoy keeps on one (it opens another
    // connection past the SETTINGS value); 1000 × 64 KiB partial messages was 64 MB a connection.
    maxConcurrentStreams: int(env, 'GRPC_MAX_CONCURRENT_STREAMS', 100, 1, 1_000_000),
    maxConnectionIdleMs: Math.ceil(idleMs),
    maxSessionMemoryMb: int(env, 'GRPC_MAX_SESSION_MEMORY', 10, 1, 4096),
    connections: Object.freeze({
      maxConnections: int(env, 'GRPC_MAX_CONNECTIONS', 256, 1, 1_000_000),
      maxFirstCallMs: Math.ceil(firstCallMs),
      maxUnfinishedRequestBytes,
      maxRequestReceiveMs: Math.ceil(receiveMs),
      resetBurst: int(env, 'GRPC_MAX_RESET_BURST', 100, 1, 1_000_000),
      resetsPerSecond: int(env, 'GRPC_MAX_RESETS_PER_SECOND', 20, 1, 1_000_000),
    }),
  });
}

export function httpLimits(env: Env): HttpLimits {
  const positive = (name: string, fallbackMs: number): number => {
    const ms = duration(env, name, fallbackMs);
    if (ms < 1 || ms > 3_600_000) throw new SettingsError(`invalid value for ${name}: '${env[name]}' (expected a duration from 1ms to 1h)`);
    return Math.ceil(ms);
  };
  const requestTimeoutMs = positive('HTTP_REQUEST_TIMEOUT', 10_000);
  const headersTimeoutMs = positive('HTTP_HEADERS_TIMEOUT', 5_000);
  if (headersTimeoutMs > requestTimeoutMs) {
    throw new SettingsError(
      `invalid value for HTTP_HEADERS_TIMEOUT: '${env.HTTP_HEADERS_TIMEOUT}' (must not exceed HTTP_REQUEST_TIMEOUT, ${requestTimeoutMs} ms)`,
    );
  }
  return Object.freeze({
    requestTimeoutMs,
    headersTimeoutMs,
    maxBodyBytes: int(env, 'HTTP_MAX_BODY_BYTES', DEFAULT_MAX_MESSAGE_BYTES, 1024, 16 * 1024 * 1024),
    maxConnections: int(env, 'HTTP_MAX_CONNECTIONS', 1024, 1, 1_000_000),
    maxConnectionsPerPeer: int(env, 'HTTP_MAX_CONNECTIONS_PER_PEER', 512, 1, 1_000_000),
  });
}

export function header(env: Env, name: string, fallback: string): string {
  const v = str(env, name, fallback);
  if (!/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/.test(v)) throw new SettingsError(`invalid value for ${name}: '${v}' (expected an HTTP header name)`);
  return v;
}

/** GRPC_MAX_CONNECTION_AGE and its grace (the reference's names and defaults). */
export function grpcConnectionAge(env: Env): { grpcMaxConnectionAgeMs: number; grpcMaxConnectionAgeGraceMs: number } {
  return {
    grpcMaxConnectionAgeMs: positiveDuration(env, 'GRPC_MAX_CONNECTION_AGE', 24 * 3_600_000),
    grpcMaxConnectionAgeGraceMs: positiveDuration(env, 'GRPC_MAX_CONNECTION_AGE_GRACE', 3_600_000),
  };
}

/** GRPC_RLS_HANDLER: who serves ShouldRateLimit, node:http2 directly or grpc-js (issue 29). */
export function grpcRlsHandler(env: Env): { grpcRlsHandler: RlsHandlerKind } {
  return { grpcRlsHandler: oneOf<RlsHandlerKind>(env, 'GRPC_RLS_HANDLER', DEFAULT_RLS_HANDLER, RLS_HANDLERS) };
}
