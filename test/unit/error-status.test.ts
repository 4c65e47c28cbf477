import { status as GrpcStatus } from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { errTypeOf, errorCodeOf, grpcStatusOf, httpStatusOf } from '../../src/base/error-status';
import {
  BackendUnavailableError,
  ConfigError,
  DeadlineExceededError,
  InvalidRequestError,
  NotReadyError,
  RequestTooLargeError,
  SettingsError,
} from '../../src/base/errors';

describe('error → status mapping', () => {
  it.each<[string, unknown, GrpcStatus, number, string]>([
    ['InvalidRequestError', new InvalidRequestError('bad'), GrpcStatus.INVALID_ARGUMENT, 400, 'invalid_request'],
    ['RequestTooLargeError', new RequestTooLargeError('big'), GrpcStatus.RESOURCE_EXHAUSTED, 413, 'invalid_request'],
    ['BackendUnavailableError', new BackendUnavailableError('down'), GrpcStatus.UNAVAILABLE, 503, 'redis_error'],
    ['DeadlineExceededError', new DeadlineExceededError('slow'), GrpcStatus.DEADLINE_EXCEEDED, 504, 'redis_error'],
    ['NotReadyError', new NotReadyError('no rules'), GrpcStatus.UNAVAILABLE, 503, 'service_error'],
    ['ConfigError', new ConfigError('f.yaml: bad'), GrpcStatus.INTERNAL, 500, 'service_error'],
    ['SettingsError', new SettingsError('bad env'), GrpcStatus.INTERNAL, 500, 'service_error'],
    ['a plain Error', new Error('boom'), GrpcStatus.INTERNAL, 500, 'service_error'],
    ['a TypeError', new TypeError('x is undefined'), GrpcStatus.INTERNAL, 500, 'service_error'],
    ['a thrown string', 'oops', GrpcStatus.INTERNAL, 500, 'service_error'],
    ['undefined', undefined, GrpcStatus.INTERNAL, 500, 'service_error'],
  ])('%s → gRPC %i, HTTP %i, err_type %s', (_name, err, grpc, http, errType) => {
    expect(grpcStatusOf(err)).toBe(grpc);
    expect(httpStatusOf(err)).toBe(http);
    expect(errTypeOf(err)).toBe(errType);
  });

  it('reads the stable code of the error family, INTERNAL for anything else', () => {
    expect(errorCodeOf(new InvalidRequestError('x'))).toBe('INVALID_REQUEST');
    expect(errorCodeOf(new BackendUnavailableError('x'))).toBe('BACKEND_UNAVAILABLE');
    expect(errorCodeOf(new Error('x'))).toBe('INTERNAL');
  });

  it('keeps the class name and the cause on family errors', () => {
    const cause = new Error('ECONNREFUSED');
    const err = new BackendUnavailableError('redis is down', { cause });
    expect(err.name).toBe('BackendUnavailableError');
    expect(err.cause).toBe(cause);
    expect(err).toBeInstanceOf(Error);
  });
});
