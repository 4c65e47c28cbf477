import type { DescriptorEntry } from '../domain/descriptor';
import type { Unit } from '../domain/units';

/** Domain types of one ShouldRateLimit call. Protobuf shapes never reach past src/rls. */

export interface LimitOverride {
  readonly requestsPerUnit: number;
  readonly unit: Unit;
}

export interface RequestDescriptor {
  readonly entries: readonly DescriptorEntry[];
  /** Per-request limit that replaces the rule tree's limit. */
  readonly limit?: LimitOverride;
  /** When present it replaces the request-level addend; 0 = check without consuming. */
  readonly hitsAddend?: number;
}

export interface RateLimitRequest {
  readonly domain: string;
  readonly descriptors: readonly RequestDescriptor[];
  /** Already normalised: the wire's 0 ("not set") arrives here as 1. */
  readonly hitsAddend: number;
  /** hits_addend as the caller sent it (0 = not set); only dynamic metadata reports it. Absent: hitsAddend. */
  readonly hitsAddendAsSent?: number;
}

export type Code = 'OK' | 'OVER_LIMIT';

export interface CurrentLimit {
  readonly name?: string;
  readonly requestsPerUnit: number;
  readonly unit: Unit;
}

export interface DescriptorStatus {
  readonly code: Code;
  readonly currentLimit?: CurrentLimit;
  readonly limitRemaining: number;
  /** Whole seconds, rounded up; 0 when there is no limit. */
  readonly durationUntilResetSeconds: number;
}

export interface HeaderPair {
  readonly key: string;
  readonly value: string;
}

export interface RateLimitResponse {
  readonly overallCode: Code;
  readonly statuses: readonly DescriptorStatus[];
  readonly responseHeadersToAdd: readonly HeaderPair[];
  readonly requestHeadersToAdd: readonly HeaderPair[];
  /** Plain JSON object; absent when RESPONSE_DYNAMIC_METADATA is off. */
  readonly dynamicMetadata?: Readonly<Record<string, unknown>>;
}
