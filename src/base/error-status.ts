import { status as GrpcStatus } from '@grpc/grpc-js';
import { FloodgateError, type ErrorCode } from './errors';

const GRPC_BY_CODE: Readonly<Record<ErrorCode, GrpcStatus>> = {
  INVALID_REQUEST: GrpcStatus.INVALID_ARGUMENT,
  TOO_LARGE: GrpcStatus.RESOURCE_EXHAUSTED,
  BACKEND_UNAVAILABLE: GrpcStatus.UNAVAILABLE,
  DEADLINE_EXCEEDED: GrpcStatus.DEADLINE_EXCEEDED,
  NOT_READY: GrpcStatus.UNAVAILABLE,
  CONFIG: GrpcStatus.INTERNAL,
  SETTINGS: GrpcStatus.INTERNAL,
  INTERNAL: GrpcStatus.INTERNAL,
};

const HTTP_BY_CODE: Readonly<Record<ErrorCode, number>> = {
  INVALID_REQUEST: 400,
  TOO_LARGE: 413,
  BACKEND_UNAVAILABLE: 503,
  DEADLINE_EXCEEDED: 504,
  NOT_READY: 503,
  CONFIG: 500,
  SETTINGS: 500,
  INTERNAL: 500,
};

/** The one place where errors become gRPC status and HTTP status codes. */
export function errorCodeOf(err: unknown): ErrorCode {
  return err instanceof FloodgateError ? err.code : 'INTERNAL';
}

export function grpcStatusOf(err: unknown): GrpcStatus {
  return GRPC_BY_CODE[errorCodeOf(err)];
}

export function httpStatusOf(err: unknown): number {
  return HTTP_BY_CODE[errorCodeOf(err)];
}

/** err_type label of ratelimit_service_should_rate_limit_error. */
export function errTypeOf(err: unknown): string {
  switch (errorCodeOf(err)) {
    case 'BACKEND_UNAVAILABLE':
    case 'DEADLINE_EXCEEDED':
      return 'redis_error';
    case 'INVALID_REQUEST':
    case 'TOO_LARGE':
      return 'invalid_request';
    default:
      return 'service_error';
  }
}
