/** TRACING_*: what the tracer provider is built from. Type only: importing it loads no SDK. */
export interface TracingSettings {
  readonly serviceName: string;
  readonly serviceNamespace: string;
  /** Empty: a random UUID per process, as in the reference. */
  readonly serviceInstanceId: string;
  /** Parent-based ratio sampler: >= 1 samples every root trace, <= 0 none. */
  readonly samplingRate: number;
  /** OTLP over HTTP (protobuf) or gRPC; the endpoint and the rest come from the standard OTEL_EXPORTER_OTLP_* variables. */
  readonly exporterProtocol: 'http' | 'grpc';
}
