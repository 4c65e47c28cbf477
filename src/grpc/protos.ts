import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { protoDir } from '../base/paths';

const RLS_SERVICE = 'envoy.service.ratelimit.v3.RateLimitService';
const HEALTH_SERVICE = 'grpc.health.v1.Health';
const REQUIRED_MESSAGES = [
  'envoy.service.ratelimit.v3.RateLimitRequest',
  'envoy.service.ratelimit.v3.RateLimitResponse',
  'envoy.extensions.common.ratelimit.v3.RateLimitDescriptor',
  'envoy.config.core.v3.HeaderValue',
  'envoy.type.v3.RateLimitUnit',
  'grpc.health.v1.HealthCheckRequest',
  'grpc.health.v1.HealthCheckResponse',
  'google.protobuf.Struct',
  'google.protobuf.Duration',
  'google.protobuf.UInt64Value',
];

/** Options shared by the server and by test/benchmark clients, so both see the same shapes. */
export const PROTO_LOADER_OPTIONS: protoLoader.Options = {
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
  includeDirs: [protoDir],
};

/**
 * The server's options: 64-bit integers as decimal strings, so a uint64 above 2^53 stays exact
 * and a value that is no uint64 is refused with the number the caller sent. ShouldRateLimit's
 * request is read by src/rls/request-decoder.ts instead, which gives the same digits
 * (test/integration/rls-codec.test.ts compares it with proto-loader under these options).
 */
export const SERVER_PROTO_LOADER_OPTIONS: protoLoader.Options = { ...PROTO_LOADER_OPTIONS, longs: String };

export interface LoadedProtos {
  readonly rlsService: grpc.ServiceDefinition;
  readonly healthService: grpc.ServiceDefinition;
  readonly rlsClient: grpc.ServiceClientConstructor;
  readonly healthClient: grpc.ServiceClientConstructor;
}

function lookup(pkg: grpc.GrpcObject, fullName: string): unknown {
  let node: unknown = pkg;
  for (const part of fullName.split('.')) {
    node = (node as Record<string, unknown> | undefined)?.[part];
  }
  return node;
}

function serviceClient(pkg: grpc.GrpcObject, fullName: string): grpc.ServiceClientConstructor {
  const ctor = lookup(pkg, fullName) as grpc.ServiceClientConstructor | undefined;
  if (typeof ctor !== 'function' || !ctor.service) {
    throw new Error(`floodgate: protobuf service ${fullName} did not load from ${protoDir}`);
  }
  return ctor;
}

/** Loads the project's protos and fails loudly when a service or message is missing. */
export function loadProtos(options: protoLoader.Options = PROTO_LOADER_OPTIONS): LoadedProtos {
  const definition = protoLoader.loadSync(['envoy/service/ratelimit/v3/rls.proto', 'grpc/health/v1/health.proto'], options);
  for (const name of REQUIRED_MESSAGES) {
    if (!definition[name]) {
      throw new Error(`floodgate: protobuf type ${name} did not load from ${protoDir}`);
    }
  }
  const pkg = grpc.loadPackageDefinition(definition);
  const rlsClient = serviceClient(pkg, RLS_SERVICE);
  const healthClient = serviceClient(pkg, HEALTH_SERVICE);
  return { rlsService: rlsClient.service, healthService: healthClient.service, rlsClient, healthClient };
}
