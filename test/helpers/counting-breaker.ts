import { CircuitBreaker } from '../../src/limiter/redis/circuit-breaker';

/** A circuit breaker that counts the outcomes it is told (RedisLimiter's `newBreaker`). */
export class CountingBreaker extends CircuitBreaker {
  successes = 0;
  failures = 0;
  override success(): void {
    this.successes++;
    super.success();
  }
  override failure(): void {
    this.failures++;
    super.failure();
  }
}
