import type * as grpc from '@grpc/grpc-js';

/**
 * The RateLimitService definition that proto-loader built, with the server side's codec
 * replaced: a request arrives as its raw bytes (decoded by the handler with
 * decodeRateLimitRequest, so that malformed bytes answer INVALID_ARGUMENT like any invalid
 * request instead of grpc-js' INTERNAL), and the handler answers with bytes it has encoded with
 * encodeRateLimitResponse (inside its own promise chain, so an error while encoding reaches the
 * caller as INTERNAL with its message). The client side (requestSerialize, responseDeserialize) is unchanged.
 */
export function withRlsServerCodec(definition: grpc.ServiceDefinition): grpc.ServiceDefinition {
  const out: Record<string, grpc.MethodDefinition<Buffer, Buffer>> = {};
  for (const [name, method] of Object.entries(definition)) {
    out[name] =
      name === 'ShouldRateLimit'
        ? {
            ...method,
            requestDeserialize: (bytes: Buffer): Buffer => bytes,
            responseSerialize: (bytes: Buffer): Buffer => bytes,
          }
        : method;
  }
  return out;
}
