import { afterEach, describe, expect, it, vi } from 'vitest';
import { CallCoalescer, type ScriptCall } from '../../../src/limiter/redis/call-coalescer';
import { CountingBreaker } from '../../helpers/counting-breaker';
import { CircuitBreaker } from '../../../src/limiter/redis/circuit-breaker';
import type { LuaScript } from '../../../src/limiter/redis/lua-script';
import type { RedisClient } from '../../../src/limiter/redis/redis-client';
import { DeadlineExceededError } from '../../../src/base/errors';

/** A script whose calls are answered (or failed) by the test: each call's keys, args and settle functions. */
function scriptedScript() {
  const calls: { keys: string[]; args: (number | string)[]; answer: (reply: number[]) => void; fail: (err: Error) => void }[] = [];
  const script: LuaScript = {
    run: (_client, keys, args) =>
      new Promise<number[]>((answer, fail) => {
        calls.push({ keys: [...keys], args: [...args], answer, fail });
      }),
  };
  return { script, calls };
}

function part(script: LuaScript, breaker: CircuitBreaker, key: string, deadline: number): ScriptCall {
  return {
    batchKey: 1,
    client: {} as RedisClient,
    script,
    scriptName: 'fixed_window',
    node: 'm|server',
    mode: 'count',
    replyWidth: 2,
    breaker,
    keys: [key],
    args: [1, 10],
    deadline,
  };
}

const outcome = (p: Promise<number[]>) =>
  p.then(
    (r) => r,
    (e: unknown) => e,
  );

describe('CallCoalescer', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('merges the calls of one turn into one script call and hands each request its part', async () => {
    const { script, calls } = scriptedScript();
    const breaker = new CountingBreaker();
    const observed: string[] = [];
    const coalescer = new CallCoalescer({ observer: { scriptCall: (s, n) => observed.push(`${s}@${n}`), refused: () => undefined } });
    const far = Date.now() + 10_000;
    const a = coalescer.run(part(script, breaker, 'a', far), true);
    const b = coalescer.run(part(script, breaker, 'b', far), true);
    await new Promise((r) => setImmediate(r));
    expect(calls).toHaveLength(1);
    expect(calls[0]?.keys).toEqual(['a', 'b']);
    expect(calls[0]?.args).toEqual(['count', 1, 10, 1, 10]);
    calls[0]?.answer([1, 2, 3, 4]);
    expect(await a).toEqual([1, 2]);
    expect(await b).toEqual([3, 4]);
    expect(breaker.successes).toBe(1);
    expect(observed).toEqual(['fixed_window@m|server']);
  });

  it("refuses each request of a merged call at its own deadline, one timer for all; the breaker hears the call's own outcome", async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'Date'] });
    const { script, calls } = scriptedScript();
    const breaker = new CountingBreaker(1000);
    const coalescer = new CallCoalescer();
    const now = Date.now();
    const early = outcome(coalescer.run(part(script, breaker, 'a', now + 20), true));
    const early2 = outcome(coalescer.run(part(script, breaker, 'b', now + 20), true));
    const late = outcome(coalescer.run(part(script, breaker, 'c', now + 100), true));
    await vi.advanceTimersByTimeAsync(1);
    expect(calls).toHaveLength(1);
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(20);
    const refused = await early;
    expect(refused).toBeInstanceOf(DeadlineExceededError);
    expect(await early2).toBeInstanceOf(DeadlineExceededError);
    // Callers giving up is not Redis failing (issue 18, finding 1): nothing is counted yet.
    expect(breaker.failures).toBe(0);
    // The reply comes before the last request's deadline: it is answered, and the call counts
    // once, as what it was for Redis: a success.
    calls[0]?.answer([1, 1, 2, 2, 3, 3]);
    expect(await late).toEqual([3, 3]);
    expect(breaker.failures).toBe(0);
    expect(breaker.successes).toBe(1);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('a request with no time left is refused without a call', async () => {
    const { script, calls } = scriptedScript();
    const breaker = new CountingBreaker();
    const coalescer = new CallCoalescer();
    const refused = await outcome(coalescer.run(part(script, breaker, 'a', Date.now() - 1), false));
    expect(refused).toBeInstanceOf(DeadlineExceededError);
    await new Promise((r) => setImmediate(r));
    expect(calls).toHaveLength(0);
    expect(breaker.failures + breaker.successes).toBe(0);
  });

  it('a request with no time left hands back the probe it was granted: a half-open breaker is not left closed to everyone', async () => {
    let now = 0;
    const breaker = new CircuitBreaker(1, 500, () => now);
    const { script } = scriptedScript();
    const coalescer = new CallCoalescer();
    breaker.failure();
    now = 600;
    expect(breaker.allow()).toBe(true); // this request is the probe
    const refused = await outcome(coalescer.run(part(script, breaker, 'a', Date.now() - 1), true));
    expect(refused).toBeInstanceOf(DeadlineExceededError);
    // No call was made, so the next request may probe.
    expect(breaker.allow()).toBe(true);
  });

  it('a call of its own goes at once with the extra arguments last, and a failure rejects it once for the breaker', async () => {
    const { script, calls } = scriptedScript();
    const breaker = new CountingBreaker(1000);
    const errors: unknown[] = [];
    const coalescer = new CallCoalescer({ observer: { scriptCall: (_s, _n, _t, err) => errors.push(err), refused: () => undefined } });
    const p = outcome(coalescer.run(part(script, breaker, 'a', Date.now() + 10_000), false, [12345]));
    expect(calls).toHaveLength(1);
    expect(calls[0]?.args).toEqual(['count', 1, 10, 12345]);
    const boom = new Error('LOADING');
    calls[0]?.fail(boom);
    expect(await p).toBe(boom);
    expect(breaker.failures).toBe(1);
    expect(errors).toEqual([boom]);
  });
});
