import { describe, expect, it } from 'vitest';
import { BreakerCall, CircuitBreaker } from '../../../src/limiter/redis/circuit-breaker';

function openBreaker() {
  const clock = { now: 0 };
  const breaker = new CircuitBreaker(3, 500, () => clock.now);
  for (let i = 0; i < 3; i++) breaker.failure();
  return { clock, breaker };
}

describe('CircuitBreaker', () => {
  it('opens after 3 failures, refuses for its open time, then lets exactly one probe through', () => {
    const { clock, breaker } = openBreaker();
    expect(breaker.isOpen).toBe(true);
    expect(breaker.allow()).toBe(false);
    clock.now = 500;
    expect(breaker.allow()).toBe(true);
    expect(breaker.allow()).toBe(false);
    breaker.success();
    expect(breaker.isOpen).toBe(false);
    expect(breaker.allow()).toBe(true);
  });

  it('a cancelled probe lets the next call probe', () => {
    const { clock, breaker } = openBreaker();
    clock.now = 500;
    expect(breaker.allow()).toBe(true);
    breaker.cancelProbe();
    expect(breaker.allow()).toBe(true);
  });
});

describe('BreakerCall', () => {
  it('tells the breaker one outcome per call: a late end after a deadline failure is not counted', () => {
    const told: string[] = [];
    const breaker = new (class extends CircuitBreaker {
      override success(): void {
        told.push('success');
      }
      override failure(): void {
        told.push('failure');
      }
    })();
    const call = new BreakerCall(breaker);
    call.failed(); // a caller's deadline passed
    call.failed(); // another caller of the same merged call
    call.succeeded(); // the call completes late
    expect(told).toEqual(['failure']);
  });

  it('track() records the settled outcome of the reply', async () => {
    const told: string[] = [];
    const breaker = new (class extends CircuitBreaker {
      override success(): void {
        told.push('success');
      }
      override failure(): void {
        told.push('failure');
      }
    })();
    await new BreakerCall(breaker).track(Promise.resolve(1));
    await expect(new BreakerCall(breaker).track(Promise.reject(new Error('down')))).rejects.toThrow('down');
    await new Promise((r) => setImmediate(r));
    expect(told).toEqual(['success', 'failure']);
  });
});
