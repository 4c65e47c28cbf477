import type { IncomingHttpHeaders } from 'node:http';
import type { Metadata } from '@grpc/grpc-js';
import type { RateLimitRequest, RateLimitResponse } from './types';

/**
 * What the transports call: the service itself, or the service wrapped in a span when tracing
 * is on. The transports hand over what the call came with (gRPC metadata, HTTP headers) as it
 * is, so with tracing off nothing is read or allocated for it.
 */
export interface RateLimitHandler {
  shouldRateLimit(request: RateLimitRequest, deadline: number, incoming?: Metadata | IncomingHttpHeaders): Promise<RateLimitResponse>;
}
