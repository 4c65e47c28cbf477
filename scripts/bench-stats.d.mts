// Types of scripts/bench-stats.mjs, for test/unit/bench-stats.test.ts.
export declare const ENVOY_TIMEOUT_MS: number;
export declare const GHZ_CUT: RegExp;
export interface Rate {
  readonly label: string;
  readonly share?: number;
  readonly rps?: number;
}
export declare function parseRates(spec: string | undefined): Rate[];
export declare function quantile(sorted: readonly number[], q: number): number | undefined;
export interface GhzDetail {
  readonly timestamp: string;
  readonly latency: number;
  readonly error?: string;
  readonly status?: string;
}
export interface GhzReport {
  readonly count?: number;
  readonly slowest?: number;
  readonly details?: readonly GhzDetail[];
  readonly histogram?: readonly { readonly mark: number; readonly count: number }[];
  readonly latencyDistribution?: readonly { readonly percentage: number; readonly latency: number }[];
}
export interface LatencyFigures {
  calls: number | undefined;
  skipped: number;
  p50: number | undefined;
  p99: number | undefined;
  p999: number | undefined;
  max: number | undefined;
  overShare: number | undefined;
}
export declare function latencyFigures(report: GhzReport, options?: { skipMs?: number; overMs?: number }): LatencyFigures;
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}
export declare function parseScrape(text: string): Sample[];
export interface GcKindDelta {
  count: number;
  totalMs: number;
  over5ms: number;
}
export declare function runtimeDelta(
  before: readonly Sample[],
  after: readonly Sample[],
): {
  loopSamples: number;
  loopOver20ms: number;
  loopOver5ms: number;
  loopDelayMs: number;
  gc: Record<'minor' | 'major' | 'incremental' | 'weakcb', GcKindDelta>;
  handled: number;
  newSpaceMb: number;
  handlerOverShare: number | undefined;
};
