import { randomUUID } from 'node:crypto';
import type { TextMapPropagator } from '@opentelemetry/api';
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core';
import { B3Propagator } from '@opentelemetry/propagator-b3';
import { envDetector, detectResources, resourceFromAttributes } from '@opentelemetry/resources';
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  ParentBasedSampler,
  SimpleSpanProcessor,
  TraceIdRatioBasedSampler,
  type SpanExporter,
} from '@opentelemetry/sdk-trace-base';
import { ATTR_SERVICE_NAME } from '@opentelemetry/semantic-conventions';
import type { LuaScript } from '../limiter/redis/lua-script';
import type { RateLimitHandler } from '../service/rate-limit-handler';
import { ActiveContext } from './active-context';
import { tracedScript } from './traced-script';
import { TracedRateLimitService } from './traced-service';
import type { TracingSettings } from './tracing-settings';

// Semantic-convention names the stable entry point does not export yet.
const ATTR_SERVICE_NAMESPACE = 'service.namespace';
const ATTR_SERVICE_INSTANCE_ID = 'service.instance.id';

/** What the app wires in when TRACING_ENABLED: wrappers for the service and the scripts, and a flush at stop. */
export interface Tracing {
  traceService(service: RateLimitHandler): RateLimitHandler;
  traceScript(script: LuaScript, name: string): LuaScript;
  /** Ends the export: what is buffered is sent, then the exporter closes. */
  shutdown(): Promise<void>;
  /** The service.instance.id in use (a random UUID when TRACING_SERVICE_INSTANCE_ID is empty). */
  readonly serviceInstanceId: string;
}

export interface TracingOptions {
  /** Test hook: export here, span by span, instead of OTLP. */
  readonly exporter?: SpanExporter;
}

async function otlpExporter(protocol: TracingSettings['exporterProtocol']): Promise<SpanExporter> {
  // Endpoint, headers, timeout, compression and certificates come from the standard
  // OTEL_EXPORTER_OTLP_* variables, which the exporters read themselves (as the reference's do).
  if (protocol === 'grpc') return new (await import('@opentelemetry/exporter-trace-otlp-grpc')).OTLPTraceExporter();
  return new (await import('@opentelemetry/exporter-trace-otlp-http')).OTLPTraceExporter();
}

/** A stop never waits long for a collector that is away, and never fails because of it. */
const SHUTDOWN_BOUND_MS = 3000;

async function boundedShutdown(provider: BasicTracerProvider): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, SHUTDOWN_BOUND_MS);
    timer.unref();
  });
  await Promise.race([provider.shutdown().catch(() => undefined), bound]);
  clearTimeout(timer);
}

/**
 * Builds the tracer provider the reference builds: a parent-based ratio sampler, a batching
 * OTLP exporter, the service name, namespace and instance id on the resource over what
 * OTEL_RESOURCE_ATTRIBUTES / OTEL_SERVICE_NAME say, and W3C trace context, B3 and baggage
 * read from incoming calls. Only loaded when TRACING_ENABLED is true.
 */
export async function startTracing(settings: TracingSettings, options: TracingOptions = {}): Promise<Tracing> {
  const serviceInstanceId = settings.serviceInstanceId || randomUUID();
  const resource = detectResources({ detectors: [envDetector] }).merge(
    resourceFromAttributes({
      [ATTR_SERVICE_NAME]: settings.serviceName,
      [ATTR_SERVICE_NAMESPACE]: settings.serviceNamespace,
      [ATTR_SERVICE_INSTANCE_ID]: serviceInstanceId,
    }),
  );
  const exporter = options.exporter ?? (await otlpExporter(settings.exporterProtocol));
  const processor = options.exporter ? new SimpleSpanProcessor(exporter) : new BatchSpanProcessor(exporter);
  const provider = new BasicTracerProvider({
    resource,
    sampler: new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(settings.samplingRate) }),
    spanProcessors: [processor],
  });
  const tracer = provider.getTracer('floodgate');
  const propagator: TextMapPropagator = new CompositePropagator({
    propagators: [new W3CTraceContextPropagator(), new B3Propagator(), new W3CBaggagePropagator()],
  });
  const active = new ActiveContext();
  return {
    serviceInstanceId,
    traceService: (service) => new TracedRateLimitService(service, tracer, propagator, active),
    traceScript: (script, name) => tracedScript(script, name, tracer, active),
    shutdown: () => boundedShutdown(provider),
  };
}
