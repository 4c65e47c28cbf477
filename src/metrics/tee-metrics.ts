import type { RedisPool, RuleHitCounts, ServiceMetrics } from './metrics';

/** Reports to several sinks (Prometheus and statsd) at once. */
export class TeeMetrics implements ServiceMetrics {
  constructor(private readonly sinks: readonly ServiceMetrics[]) {}

  recordRule(domain: string, metricKey: string, counts: RuleHitCounts): void {
    for (const s of this.sinks) s.recordRule(domain, metricKey, counts);
  }

  domainNotFound(domain: string): void {
    for (const s of this.sinks) s.domainNotFound(domain);
  }

  globalShadowMode(): void {
    for (const s of this.sinks) s.globalShadowMode();
  }

  shouldRateLimitError(errType: string): void {
    for (const s of this.sinks) s.shouldRateLimitError(errType);
  }

  configLoad(success: boolean): void {
    for (const s of this.sinks) s.configLoad(success);
  }

  requestDone(method: string, seconds: number): void {
    for (const s of this.sinks) s.requestDone(method, seconds);
  }

  setBackendHealthy(healthy: boolean): void {
    for (const s of this.sinks) s.setBackendHealthy(healthy);
  }

  redisConnection(pool: RedisPool, event: 'open' | 'close'): void {
    for (const s of this.sinks) s.redisConnection(pool, event);
  }

  memoryCountersEvicted(count: number): void {
    for (const s of this.sinks) s.memoryCountersEvicted(count);
  }
}
