import type * as grpc from '@grpc/grpc-js';
import { encodeRateLimitResponse } from './response-encoder';

/**
 * The RateLimitService definition that proto-loader built, with the server side's codec
 * replaced: a request arrives as its raw bytes (decoded by the handler with
 * decodeRateLimitRequest, so that malformed bytes answer INVALID_ARGUMENT like any invalid
 * request instead of grpc-js' INTERNAL), and the handler's domain response is encoded by
 * encodeRateLimitResponse. The client side (requestSerialize, responseDeserialize) is unchanged.
 */
export function withRlsServerCodec(definition: grpc.ServiceDefinition): grpc.ServiceDefinition {
  const out: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
  for (const [name, method] of Object.entries(definition)) {
    out[name] =
      name === 'ShouldRateLimit'
        ? {
            ...method,
            requestDeserialize: (bytes: Buffer): Buffer => bytes,
            responseSerialize: encodeRateLimitResponse as (value: unknown) => Buffer,
          }
        : method;
  }
  return out as grpc.ServiceDefinition;
}
