import type { RateLimitRequest, RateLimitResponse } from './types';

/**
 * What a call came with on its transport (gRPC metadata, HTTP headers), handed over as it is and
 * opaque to the service: only a wrapper in the transport layers (tracing) reads it, so the service
 * knows no transport's types, and with tracing off nothing is read or allocated for it.
 */
export type IncomingCarrier = object;

/** What the transports call: the service itself, or the service wrapped in a span when tracing is on. */
export interface RateLimitHandler {
  shouldRateLimit(request: RateLimitRequest, deadline: number, incoming?: IncomingCarrier): Promise<RateLimitResponse>;
}
