// Object shapes that @grpc/proto-loader produces and accepts for the RLS v3 messages with the
// options in protos.ts (keepCase, enums as strings, longs as numbers, defaults on). They stop
// at src/grpc: the rest of the service speaks src/service/types.ts.

export type WireUnit = 'UNKNOWN' | 'SECOND' | 'MINUTE' | 'HOUR' | 'DAY' | 'MONTH' | 'YEAR';
export type WireCode = 'UNKNOWN' | 'OK' | 'OVER_LIMIT';

export interface WireEntry {
  key: string;
  value: string;
}

export interface WireDescriptor {
  entries: WireEntry[];
  /** null when absent. `unit` is a number when the value is outside the enum. */
  limit: { requests_per_unit: number; unit: WireUnit | number } | null;
  /** A decimal string on the server side (exact for any uint64), a number in test clients. */
  hits_addend: { value: number | string } | null;
}

export interface WireRequest {
  domain: string;
  descriptors: WireDescriptor[];
  hits_addend: number;
}

export interface WireRateLimit {
  name: string;
  requests_per_unit: number;
  unit: string;
}

export interface WireDescriptorStatus {
  code: WireCode;
  current_limit?: WireRateLimit;
  limit_remaining: number;
  duration_until_reset?: { seconds: number; nanos: number };
}

export interface WireHeader {
  key: string;
  value: string;
}

/** google.protobuf.Value as proto-loader expects it: camelCase oneof keys even with keepCase. */
export type WireValue =
  | { nullValue: 'NULL_VALUE' }
  | { numberValue: number }
  | { stringValue: string }
  | { boolValue: boolean }
  | { structValue: WireStruct }
  | { listValue: { values: WireValue[] } };

export interface WireStruct {
  fields: Record<string, WireValue>;
}

export interface WireResponse {
  overall_code: WireCode;
  statuses: WireDescriptorStatus[];
  response_headers_to_add: WireHeader[];
  request_headers_to_add: WireHeader[];
  raw_body?: Buffer;
  dynamic_metadata?: WireStruct;
}

export interface WireHealthRequest {
  service: string;
}

export type WireServingStatus = 'UNKNOWN' | 'SERVING' | 'NOT_SERVING' | 'SERVICE_UNKNOWN';
