import type { IncomingHttpHeaders } from 'node:http';
import { Metadata } from '@grpc/grpc-js';
import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Context,
  type TextMapGetter,
  type TextMapPropagator,
  type Tracer,
} from '@opentelemetry/api';
import type { IncomingCarrier, RateLimitHandler } from '../service/rate-limit-handler';
import type { RateLimitRequest, RateLimitResponse } from '../service/types';
import type { ActiveContext } from './active-context';

const metadataGetter: TextMapGetter<Metadata> = {
  keys: (carrier) => Object.keys(carrier.getMap()),
  get: (carrier, key) => {
    const values = carrier.get(key);
    if (values.length === 0) return undefined;
    return values.map(String);
  },
};

const headersGetter: TextMapGetter<IncomingHttpHeaders> = {
  keys: (carrier) => Object.keys(carrier),
  get: (carrier, key) => carrier[key.toLowerCase()],
};

/** The span's name and attribute names; `domain` as the reference names it. */
export const SHOULD_RATE_LIMIT_SPAN = 'ShouldRateLimit Execution';
export const ATTR_DOMAIN = 'domain';
export const ATTR_DESCRIPTOR_COUNT = 'descriptor_count';
export const ATTR_DECISION = 'decision';

/**
 * One span per ShouldRateLimit: a child of the caller's trace when Envoy sent W3C or B3
 * headers, with the domain, the descriptor count and the decision. The span is the active
 * context while the call runs, so Redis script calls become its children.
 */
export class TracedRateLimitService implements RateLimitHandler {
  constructor(
    private readonly inner: RateLimitHandler,
    private readonly tracer: Tracer,
    private readonly propagator: TextMapPropagator,
    private readonly active: ActiveContext,
  ) {}

  shouldRateLimit(request: RateLimitRequest, deadline: number, incoming?: IncomingCarrier): Promise<RateLimitResponse> {
    const parent = this.parentOf(incoming);
    const span = this.tracer.startSpan(
      SHOULD_RATE_LIMIT_SPAN,
      { kind: SpanKind.SERVER, attributes: { [ATTR_DOMAIN]: request.domain, [ATTR_DESCRIPTOR_COUNT]: request.descriptors.length } },
      parent,
    );
    // Not sampled: nothing of it will be exported and its children would not be sampled either,
    // so the call runs untraced (no context to carry, no attributes to set).
    if (!span.isRecording()) return this.inner.shouldRateLimit(request, deadline);
    return this.active
      .run(trace.setSpan(parent, span), () => this.inner.shouldRateLimit(request, deadline))
      .then(
        (response) => {
          span.setAttribute(ATTR_DECISION, response.overallCode);
          span.end();
          return response;
        },
        (err: unknown) => {
          const message = err instanceof Error ? err.message : String(err);
          span.recordException(err instanceof Error ? err : message);
          span.setStatus({ code: SpanStatusCode.ERROR, message });
          span.end();
          throw err;
        },
      );
  }

  private parentOf(incoming: IncomingCarrier | undefined): Context {
    if (incoming === undefined) return ROOT_CONTEXT;
    if (incoming instanceof Metadata) return this.propagator.extract(ROOT_CONTEXT, incoming, metadataGetter);
    // The HTTP transport hands over Node's request headers.
    return this.propagator.extract(ROOT_CONTEXT, incoming, headersGetter);
  }
}
