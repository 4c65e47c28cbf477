import * as grpc from '@grpc/grpc-js';
import { loadProtos } from '../../src/grpc/protos';
import type { WireResponse } from '../../src/rls/wire-types';

/** What a test sends: plain objects in proto-loader's keepCase form. */
export interface TestDescriptor {
  entries: { key: string; value: string }[];
  limit?: { requests_per_unit: number; unit: string | number };
  hits_addend?: { value: number };
}
export interface TestRequest {
  domain: string;
  descriptors: TestDescriptor[];
  hits_addend?: number;
}

type Unary<Req, Res> = (
  request: Req,
  options: grpc.CallOptions,
  callback: (err: grpc.ServiceError | null, response: Res) => void,
) => grpc.ClientUnaryCall;
type UnaryWithMetadata<Req, Res> = (
  request: Req,
  metadata: grpc.Metadata,
  options: grpc.CallOptions,
  callback: (err: grpc.ServiceError | null, response: Res) => void,
) => grpc.ClientUnaryCall;

/** The RLS client proto-loader builds at run time, with its one method typed. */
export interface RlsStub extends grpc.Client {
  ShouldRateLimit: Unary<TestRequest, WireResponse> & UnaryWithMetadata<TestRequest, WireResponse>;
}

/** The grpc.health.v1 client proto-loader builds at run time, with its methods typed. */
export interface HealthStub extends grpc.Client {
  Check: Unary<{ service: string }, { status: string }>;
  Watch(request: { service: string }): grpc.ClientReadableStream<{ status: string }>;
}

export function rlsStub(address: string, credentials: grpc.ChannelCredentials, options: grpc.ChannelOptions = {}): RlsStub {
  return new (loadProtos().rlsClient)(address, credentials, options) as unknown as RlsStub;
}

export function healthStub(address: string, credentials: grpc.ChannelCredentials, options: grpc.ChannelOptions = {}): HealthStub {
  return new (loadProtos().healthClient)(address, credentials, options) as unknown as HealthStub;
}

export interface RlsTestClient {
  shouldRateLimit(request: TestRequest, timeoutMs?: number): Promise<WireResponse>;
  healthCheck(service?: string): Promise<string>;
  close(): void;
}

/** A real gRPC client built from the project's own protos. */
export function rlsClient(address: string, channelOptions: grpc.ChannelOptions = {}): RlsTestClient {
  const rls = rlsStub(address, grpc.credentials.createInsecure(), channelOptions);
  const health = healthStub(address, grpc.credentials.createInsecure(), channelOptions);
  return {
    shouldRateLimit(request, timeoutMs = 5000) {
      return new Promise((resolve, reject) => {
        rls.ShouldRateLimit(request, { deadline: Date.now() + timeoutMs }, (err, res) => (err ? reject(err) : resolve(res)));
      });
    },
    healthCheck(service = '') {
      return new Promise((resolve, reject) => {
        health.Check({ service }, { deadline: Date.now() + 5000 }, (err, res) => (err ? reject(err) : resolve(res.status)));
      });
    },
    close() {
      rls.close();
      health.close();
    },
  };
}

/** Shorthand for a request with one descriptor of the given entries. */
export function oneDescriptor(domain: string, entries: Record<string, string>, extra: Partial<TestDescriptor> = {}): TestRequest {
  return { domain, descriptors: [{ entries: Object.entries(entries).map(([key, value]) => ({ key, value })), ...extra }] };
}
