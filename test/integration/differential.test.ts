import Redis from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Algorithm } from '../../src/domain/algorithm';
import type { LimitCheck, LimitResult } from '../../src/limiter/limiter';
import type { LimitSpec } from '../../src/domain/limit-spec';
import { ALGORITHMS as ALL_ALGORITHMS } from '../../src/domain/algorithm';
import { MemoryLimiter } from '../../src/limiter/memory/memory-limiter';
import { OverLimitCache } from '../../src/limiter/over-limit-cache';
import { counterKey } from '../../src/limiter/counter-key';
import { RedisLimiter } from '../../src/limiter/redis/redis-limiter';
import { algorithmScripts } from '../../src/limiter/redis/algorithm-scripts';
import { readLuaScript } from '../../src/limiter/redis/lua-script';
import { startStandalone, type RedisProcess } from '../harness/redis-servers';
import { TRACE_START, seededRandom } from '../helpers/algorithm-traces';
import { ReferenceModel, type ModelCheck, type ModelResult } from '../helpers/reference-model';

// The differential test of issue 7: random traces, from a printed seed, driven against the
// reference model (test/helpers/reference-model.ts), the memory backend and the Lua scripts on
// a real Redis, all on one pinned clock. Traces cross window edges to the millisecond, ask for
// more hits than the limit, limit 0, peeks, change limits and bursts, step the clock back,
// repeat a counter within one call, and use STOP mode. Any difference fails with the trace.
// A second run puts the local over-limit cache in front of both backends: its answers, from
// the cache or not, must be the ones the counter itself gives.
//
// DIFF_STEPS (default 5000) steps per algorithm, DIFF_SEED (default fixed) to replay or vary.

const STEPS = Number(process.env.DIFF_STEPS ?? 5000);
const SEED = Number(process.env.DIFF_SEED ?? 20261126);
/** Steps sent to Redis in one pipeline. */
const CHUNK = 500;

// Redis expires a key on its own clock; with a pinned clock the test expires, before each call,
// every key of the trace whose expiry time has passed on the pinned clock, as Redis would have.
const EXPIRE_ON_PINNED_CLOCK = `
local function expire(key)
  local at = redis.call('PEXPIRETIME', key)
  if at >= 0 and at <= tonumber(ARGV[1]) then redis.call('DEL', key) end
end
for i = 1, #KEYS do
  expire(KEYS[i])
  -- The fixed window's keys, one per window (lua/lib/fixed_window_step.lua).
  for _, key in ipairs(redis.call('KEYS', KEYS[i] .. ':*')) do expire(key) end
end
return 0`;

interface Counter {
  readonly index: number;
  readonly windowSeconds: number;
  limit: number;
  burst: number;
}

interface Step {
  readonly now: number;
  readonly stop: boolean;
  readonly checks: readonly { readonly counter: number; readonly spec: LimitSpec; readonly hits: number }[];
}

/** A random trace for one algorithm; deterministic in `seed`. */
function makeTrace(algorithm: Algorithm, seed: number, steps: number, clockStepsBack = true): Step[] {
  const random = seededRandom(seed);
  const counters: Counter[] = [1, 2, 5].map((windowSeconds, index) => ({ index, windowSeconds, limit: 1 + random(5), burst: 1 + random(6) }));
  let now = TRACE_START + random(86_400_000);
  const out: Step[] = [];
  for (let s = 0; s < steps; s++) {
    const r = random(100);
    const w = counters[random(counters.length)]!.windowSeconds * 1000;
    if (r < 45) now += random(250);
    else if (r < 55)
      now = now - (now % w) + w; // exactly a window edge
    else if (r < 60)
      now = now - (now % w) + w - 1; // the last millisecond before it
    else if (r < 68)
      now = clockStepsBack ? now - 1 - random(1500) : now + random(1500); // the clock steps back (failover to a lagging replica)
    else if (r < 73) now += w * (1 + random(3)) + random(1000);
    else now += random(5);
    if (random(100) < 4) {
      // A rule reload changes a limit (or a burst); the counter keeps its key.
      const c = counters[random(counters.length)]!;
      c.limit = random(7);
      c.burst = 1 + random(8);
    }
    const n = 1 + random(3);
    const checks = Array.from({ length: n }, () => {
      // Counters repeat within one call.
      const c = counters[random(counters.length)]!;
      const h = random(100);
      const hits = h < 15 ? 0 : h < 55 ? 1 : 2 + random(c.limit + 3);
      return { counter: c.index, spec: { algorithm, limit: c.limit, windowSeconds: c.windowSeconds, burst: c.burst }, hits };
    });
    out.push({ now, stop: random(100) < 40, checks });
  }
  return out;
}

const modelChecks = (algorithm: Algorithm, st: Step): ModelCheck[] =>
  st.checks.map((c) => ({
    key: `${c.counter}`,
    algorithm,
    limit: c.spec.limit,
    windowMs: c.spec.windowSeconds * 1000,
    burst: c.spec.burst,
    hits: c.hits,
  }));

const limitChecks = (st: Step): LimitCheck[] =>
  st.checks.map((c) => ({ counter: { domain: 'diff', entries: [{ key: 'c', value: `${c.counter}` }] }, spec: c.spec, hits: c.hits }));

const plain = (r: LimitResult): ModelResult => ({
  allowed: r.allowed,
  used: r.used,
  remaining: r.remaining,
  resetMs: r.resetMs,
  retryAfterMs: r.retryAfterMs,
  blockedForMs: r.blockedForMs ?? 0,
});

/** The trace up to step `at`, as the failure message. */
function describeTrace(algorithm: Algorithm, trace: readonly Step[], at: number): string {
  const lines = trace.slice(0, at + 1).map((st, i) => {
    const checks = st.checks.map((c) => `#${c.counter} ${c.hits}h L${c.spec.limit} W${c.spec.windowSeconds}s B${c.spec.burst}`).join(', ');
    return `  ${i}: t=${st.now - TRACE_START}${st.stop ? ' STOP' : ''} [${checks}]`;
  });
  return `${algorithm}, seed ${SEED}, steps 0..${at} (t in ms after 2030-01-01):\n${lines.join('\n')}`;
}

const ALGORITHMS = [...ALL_ALGORITHMS];

let server: RedisProcess;
let redis: Redis;
let expireSha: string;
const scripts = algorithmScripts();
const shas: Partial<Record<Algorithm, string>> = {};

beforeAll(async () => {
  server = await startStandalone();
  redis = new Redis({ host: server.host, port: server.port, maxRetriesPerRequest: 1 });
  expireSha = String(await redis.script('LOAD', EXPIRE_ON_PINNED_CLOCK));
  for (const algorithm of ALGORITHMS) shas[algorithm] = String(await redis.script('LOAD', readLuaScript(algorithm)));
}, 60_000);
afterAll(async () => {
  redis?.disconnect();
  await server?.stop();
}, 30_000);

describe('differential: reference model, memory backend and Lua scripts agree on random traces', () => {
  it.each(ALGORITHMS)(
    '%s',
    async (algorithm) => {
      const seed = SEED + ALGORITHMS.indexOf(algorithm);
      console.info(`differential ${algorithm}: ${STEPS} steps, seed ${SEED} (DIFF_STEPS, DIFF_SEED to change)`);
      const trace = makeTrace(algorithm, seed, STEPS);
      // Memory keeps a fixed window's latest two windows, Redis a key per window: they differ only
      // when the clock steps back two windows or more (ReferenceModel's constructor).
      const model = new ReferenceModel('latest two');
      const redisModel = new ReferenceModel('each window');
      const clock = { now: 0 };
      const memory = new MemoryLimiter({ now: () => clock.now, sweepIntervalMs: 3_600_000 });
      const script = scripts[algorithm];
      // One hash tag: every key of the trace in one slot, so each call is one script call.
      const keyOf = (counter: number, spec: LimitSpec) => `diff:{${algorithm}-${seed}}:${counter}:${spec.windowSeconds}`;

      const expected: ModelResult[][] = [];
      const expectedOfRedis: ModelResult[][] = [];
      const fromMemory: ModelResult[][] = [];
      for (const st of trace) {
        clock.now = st.now;
        expected.push(model.call(modelChecks(algorithm, st), st.now, st.stop));
        expectedOfRedis.push(redisModel.call(modelChecks(algorithm, st), st.now, st.stop));
        // The memory backend sweeps expired counters every second; here at every step, as the
        // time passing on the pinned clock expires the keys in redis.
        memory.sweep();
        fromMemory.push(memory.checkNow(limitChecks(st), st.stop).map(plain));
      }
      await memory.close();

      const allKeys = [...new Set(trace.flatMap((st) => st.checks.map((c) => keyOf(c.counter, c.spec))))];
      const fromRedis: ModelResult[][] = [];
      for (let first = 0; first < trace.length; first += CHUNK) {
        const pipeline = redis.pipeline();
        for (const st of trace.slice(first, first + CHUNK)) {
          const checks = limitChecks(st);
          const keys = st.checks.map((c, k) => script.declaredKey(keyOf(c.counter, c.spec), checks[k]!, st.now));
          const pass = st.stop ? 'stop' : 'count';
          const args: (number | string)[] = [script.mode(pass)];
          script.pushGroupHeader(args, checks.length, pass);
          for (const c of checks) script.pushArgs(args, c);
          args.push(st.now);
          pipeline.evalsha(expireSha, allKeys.length, ...allKeys, st.now);
          pipeline.evalsha(shas[algorithm]!, keys.length, ...keys, ...args);
        }
        const replies = (await pipeline.exec())!;
        for (let j = 1; j < replies.length; j += 2) {
          const [err, reply] = replies[j]!;
          if (err) throw err;
          const st = trace[first + (j - 1) / 2]!;
          const checks = limitChecks(st);
          fromRedis.push(checks.map((c, k) => plain(script.decode(reply as number[], k, c, st.stop ? 'stop' : 'count'))));
        }
      }

      let denied = 0;
      let blocked = 0;
      let keptByEachWindow = 0;
      for (let i = 0; i < trace.length; i++) {
        const want = expected[i]!;
        const wantOfRedis = expectedOfRedis[i]!;
        if (JSON.stringify(fromMemory[i]) !== JSON.stringify(want) || JSON.stringify(fromRedis[i]) !== JSON.stringify(wantOfRedis)) {
          const message = `${describeTrace(algorithm, trace, i)}\nmodel:  ${JSON.stringify(want)}\nmemory: ${JSON.stringify(fromMemory[i])}\nmodel (each window): ${JSON.stringify(wantOfRedis)}\nredis:  ${JSON.stringify(fromRedis[i])}`;
          expect.fail(message);
        }
        if (JSON.stringify(want) !== JSON.stringify(wantOfRedis)) keptByEachWindow++;
        denied += want.filter((r) => !r.allowed).length;
        blocked += want.filter((r) => r.blockedForMs > 0).length;
      }
      console.info(
        `differential ${algorithm}: ${trace.length} steps agree (${denied} denials, ${blocked} blocked answers; ${keptByEachWindow} answers where a key per window differs from the latest two)`,
      );
      // The clock's steps back reach the corner where the two layouts differ (fixed_window only).
      if (algorithm === 'fixed_window') expect(keptByEachWindow).toBeGreaterThan(0);
      else expect(keptByEachWindow).toBe(0);
      // The trace is worth something only if it reaches the interesting answers.
      expect(denied).toBeGreaterThan(trace.length / 20);
      expect(blocked).toBeGreaterThan(trace.length / 20);
    },
    60_000 + STEPS * 10,
  );
});

/**
 * What the counters answer to one call made through the local over-limit cache, given which of
 * its checks the cache answered (`fromCache`). A check answered from the cache must get the
 * counter's own answer as it stands: judged with its hits, charged nothing. The cache does not
 * charge what it answers (the point of the cache, and what the reference's local cache does),
 * so the model follows that: the other checks go to the counters as asked. In STOP mode the
 * cache answers a request only whole: with anything it does not know, every check goes to the
 * counters, cached ones included (issue 27: a request's STOP decision spans its counters).
 */
function expectedThroughCache(
  model: ReferenceModel,
  checks: readonly ModelCheck[],
  now: number,
  stop: boolean,
  fromCache: readonly boolean[],
): ModelResult[] {
  const out = new Array<ModelResult>(checks.length);
  const missed: number[] = [];
  checks.forEach((c, i) => {
    if (fromCache[i]) out[i] = model.look([c], now)[0]!;
    else missed.push(i);
  });
  if (missed.length === 0) return out;
  // STOP mode: the backend's STOP rule over the whole request, cached counters included.
  if (stop) return model.call(checks, now, true);
  const answers = model.call(
    missed.map((i) => checks[i]!),
    now,
    stop,
  );
  missed.forEach((i, j) => (out[i] = answers[j]!));
  return out;
}

/**
 * Whether, as the counters stand, one check of a request is denied whatever its hits (the cache
 * keeps such a denial) while another counter is denied by these hits only (a smaller request
 * would pass): the case where a STOP decision taken without the known one would differ (issue 27).
 */
function knownDeniedBesideNearLimit(model: ReferenceModel, checks: readonly ModelCheck[], now: number): boolean {
  const looks = model.look(checks, now);
  const known = new Set<string>();
  const near = new Set<string>();
  looks.forEach((r, i) => {
    const { key, hits } = checks[i]!;
    if (hits === 0 || r.allowed) return;
    (r.blockedForMs > 0 ? known : near).add(key);
  });
  for (const key of near) if ([...known].some((k) => k !== key)) return true;
  return false;
}

/**
 * The fields compared: all of them, except the `used` of an answer from the cache. That is the
 * count when the entry was made, and the counter moves on under an entry (fixed_window counts
 * the denied hits of the requests the entry does not cover, a sliding count decays); nothing
 * reads it (the service counts every hit of a cached answer as over, hit-counts.ts). What a
 * client sees, allowed, remaining and the times (reset, Retry-After) are exact, and so is
 * blockedForMs, which decides how long the entry lives.
 */
function comparable(r: ModelResult, fromCache: boolean): Partial<ModelResult> {
  const { allowed, used, remaining, resetMs, retryAfterMs, blockedForMs } = r;
  return fromCache
    ? { allowed, remaining, resetMs, retryAfterMs, blockedForMs }
    : { allowed, used, remaining, resetMs, retryAfterMs, blockedForMs };
}

/** One backend behind its own over-limit cache, and the model that follows it. */
interface CachedSide {
  readonly name: string;
  readonly cache: OverLimitCache;
  readonly model: ReferenceModel;
  /** Runs before each call, on the pinned clock (expiring what the backend would have expired). */
  readonly beforeCall: (now: number) => void;
  fromCache: number;
}

const CACHE_BYTES = 10_000_000;

describe("differential through the local over-limit cache: every answer is the counter's own", () => {
  it.each(ALGORITHMS)(
    '%s',
    async (algorithm) => {
      const seed = SEED + 100 + ALGORITHMS.indexOf(algorithm);
      console.info(`differential ${algorithm} with the local cache: ${STEPS} steps, seed ${SEED} (DIFF_STEPS, DIFF_SEED to change)`);
      // No clock step back here: the cache times its entries on the service's monotonic clock, and
      // a step back of the backend's clock is invisible to it (the runs above cover step backs).
      const trace = makeTrace(algorithm, seed, STEPS, false);
      // The cache's clock is the pinned clock too: its entries are timed in the same
      // milliseconds as the counters' answers it keeps.
      const clock = { now: 0 };
      const memory = new MemoryLimiter({ now: () => clock.now, sweepIntervalMs: 3_600_000 });
      const prefix = `diffc${seed}:`;
      const client = new Redis({ host: server.host, port: server.port, maxRetriesPerRequest: 1 });
      const redisLimiter = new RedisLimiter({ client, keyPrefix: prefix, pinnedNow: () => clock.now });
      const allKeys = [...new Set(trace.flatMap((st) => limitChecks(st).map((c) => counterKey(prefix, c.counter, c.spec))))];
      const sides: CachedSide[] = [
        {
          name: 'memory',
          cache: new OverLimitCache(memory, { maxBytes: CACHE_BYTES, now: () => clock.now }),
          model: new ReferenceModel(),
          beforeCall: () => memory.sweep(),
          fromCache: 0,
        },
        {
          name: 'redis',
          cache: new OverLimitCache(redisLimiter, { maxBytes: CACHE_BYTES, now: () => clock.now }),
          model: new ReferenceModel('each window'),
          // Sent on the limiter's own connection, so it runs before the limiter's script call.
          beforeCall: (now) => void client.evalsha(expireSha, allKeys.length, ...allKeys, now),
          fromCache: 0,
        },
      ];
      // Issue 27's case in STOP mode: a counter that denies every request (which the cache keeps)
      // beside another counter that these hits put over but a smaller request would not.
      let stopMixed = 0;
      try {
        for (let i = 0; i < trace.length; i++) {
          const st = trace[i]!;
          clock.now = st.now;
          const checks = modelChecks(algorithm, st);
          if (st.stop && knownDeniedBesideNearLimit(sides[0]!.model, checks, st.now)) stopMixed++;
          for (const side of sides) {
            side.beforeCall(st.now);
            const got = (await side.cache.check(limitChecks(st), { deadline: Date.now() + 10_000, stopIncrementWhenOverLimit: st.stop })).map(
              (r) => ({ ...plain(r), fromLocalCache: r.fromLocalCache === true }),
            );
            const fromCache = got.map((r) => r.fromLocalCache);
            const want: ModelResult[] = expectedThroughCache(side.model, checks, st.now, st.stop, fromCache);
            side.fromCache += fromCache.filter(Boolean).length;
            if (
              JSON.stringify(got.map((r, k) => comparable(r, fromCache[k]!))) !==
              JSON.stringify(want.map((r, k) => comparable(r, fromCache[k]!)))
            ) {
              const flags = fromCache.map((f) => (f ? 'cache' : 'backend')).join(', ');
              expect.fail(
                `${describeTrace(algorithm, trace, i)}\nthrough the cache on ${side.name} (${flags}; the used of a cached answer is not compared):\nmodel: ${JSON.stringify(want)}\ngot:   ${JSON.stringify(got)}`,
              );
            }
          }
        }
      } finally {
        await Promise.all(sides.map((side) => side.cache.close()));
      }
      const checks = trace.reduce((n, st) => n + st.checks.length, 0);
      console.info(
        `differential ${algorithm} with the local cache: ${trace.length} steps agree (${checks} checks; from the cache: ${sides.map((s) => `${s.name} ${s.fromCache}`).join(', ')}; ${stopMixed} STOP requests with a counter denying every request beside one these hits put over)`,
      );
      // The comparison is worth something only if the cache answers often, and if STOP requests
      // mix a denial the cache keeps with a counter near its limit.
      for (const side of sides) expect(side.fromCache, side.name).toBeGreaterThan(checks / 20);
      expect(stopMixed).toBeGreaterThan(trace.length / 100);
    },
    60_000 + STEPS * 20,
  );
});

// ---- issue 21: `rate_limits` lists, all or nothing, mixed algorithms ----

/** One descriptor of the list trace: a list of 2 or 3 limits, or a single limit. */
interface ListDescriptor {
  readonly index: number;
  readonly specs: { algorithm: Algorithm; windowSeconds: number; limit: number; burst: number }[];
}

interface ListStep {
  readonly now: number;
  readonly stop: boolean;
  /** Distinct descriptors, each with its hits. */
  readonly units: readonly { readonly descriptor: number; readonly hits: number; readonly specs: readonly LimitSpec[] }[];
}

/** The descriptors of the list trace (see makeListTrace). */
function listDescriptors(random: (n: number) => number): ListDescriptor[] {
  const descriptors: ListDescriptor[] = [];
  for (let index = 0; index < 6; index++) {
    const size = index < 4 ? 2 + random(2) : 1;
    const specs: ListDescriptor['specs'] = [];
    while (specs.length < size) {
      const algorithm = ALGORITHMS[random(ALGORITHMS.length)]!;
      const windowSeconds = [1, 2, 5][random(3)]!;
      if (specs.some((s) => s.algorithm === algorithm && s.windowSeconds === windowSeconds)) continue;
      specs.push({ algorithm, windowSeconds, limit: 1 + random(5), burst: 1 + random(6) });
    }
    descriptors.push({ index, specs });
  }
  // Two lists of fixed windows only, which RedisLimiter sends to lua/fixed_window_list.lua (the
  // others go to lua/limit_list.lua): one of two windows, one of three.
  for (const size of [2, 3]) {
    const windows = [1, 2, 5];
    if (size === 2) windows.splice(random(3), 1);
    descriptors.push({
      index: descriptors.length,
      specs: windows.map((windowSeconds) => ({ algorithm: 'fixed_window', windowSeconds, limit: 1 + random(5), burst: 1 })),
    });
  }
  return descriptors;
}

/** The list trace's next clock reading: small steps, window edges, steps back (when `clockStepsBack`), jumps. */
function nextListTime(random: (n: number) => number, now: number, clockStepsBack: boolean): number {
  const r = random(100);
  const w = [1, 2, 5][random(3)]! * 1000;
  if (r < 45) now += random(250);
  else if (r < 55) now = now - (now % w) + w;
  else if (r < 60) now = now - (now % w) + w - 1;
  else if (r < 68)
    now = clockStepsBack ? now - 1 - random(1500) : now + random(1500); // the clock steps back
  else if (r < 73) now += w * (1 + random(3)) + random(1000);
  else now += random(5);
  return now;
}

/**
 * Four descriptors with a list of mixed algorithms (never two on one counter), two with one
 * limit, two with a list of fixed windows; a list's limit is sometimes counted alone, on the
 * same key.
 */
function makeListTrace(seed: number, steps: number, clockStepsBack = true): { descriptors: ListDescriptor[]; trace: ListStep[] } {
  const random = seededRandom(seed);
  const descriptors = listDescriptors(random);
  let now = TRACE_START + random(86_400_000);
  const trace: ListStep[] = [];
  for (let s = 0; s < steps; s++) {
    now = nextListTime(random, now, clockStepsBack);
    if (random(100) < 4) {
      const spec = descriptors[random(descriptors.length)]!.specs[0]!;
      spec.limit = random(7);
      spec.burst = 1 + random(8);
    }
    const picked = new Set<number>();
    const n = 1 + random(3);
    while (picked.size < n) picked.add(random(descriptors.length));
    const units = [...picked].map((descriptor) => {
      const h = random(100);
      const hits = h < 10 ? 0 : h < 60 ? 1 : 2 + random(4);
      const specs = descriptors[descriptor]!.specs.map((spec) => ({ ...spec }));
      // One limit of a list alone now and then (as an override would count it): the same key
      // through lua/<algorithm>.lua and through lua/limit_list.lua must mean the same state.
      const alone = specs.length > 1 && random(100) < 25;
      return { descriptor, hits, specs: alone ? [specs[random(specs.length)]!] : specs };
    });
    trace.push({ now, stop: random(100) < 40, units });
  }
  return { descriptors, trace };
}

const listLimitChecks = (st: ListStep): LimitCheck[] =>
  st.units.flatMap((u) =>
    u.specs.map((spec, j) => ({
      counter: { domain: 'difflist', entries: [{ key: 'd', value: `${u.descriptor}` }] },
      spec,
      hits: u.hits,
      ...(j === 0 && u.specs.length > 1 && { listSize: u.specs.length }),
    })),
  );

const listModelUnits = (st: ListStep): ModelCheck[][] =>
  st.units.map((u) =>
    u.specs.map((spec) => ({
      key: `${u.descriptor}:${spec.algorithm}:${spec.windowSeconds}`,
      algorithm: spec.algorithm,
      limit: spec.limit,
      windowMs: spec.windowSeconds * 1000,
      burst: spec.burst,
      hits: u.hits,
    })),
  );

describe('differential: rate_limits lists (issue 21) on the memory backend and through RedisLimiter', () => {
  it(
    'mixed-algorithm lists, all or nothing, with and without STOP',
    async () => {
      const seed = SEED + 200;
      console.info(`differential lists: ${STEPS} steps, seed ${SEED} (DIFF_STEPS, DIFF_SEED to change)`);
      const { descriptors, trace } = makeListTrace(seed, STEPS);
      console.info(
        `lists: ${descriptors.map((d) => `#${d.index} [${d.specs.map((s) => `${s.algorithm}/${s.windowSeconds}s`).join(', ')}]`).join(' ')}`,
      );
      const clock = { now: 0 };
      const memory = new MemoryLimiter({ now: () => clock.now, sweepIntervalMs: 3_600_000 });
      const prefix = `diffl${seed}:`;
      const client = new Redis({ host: server.host, port: server.port, maxRetriesPerRequest: 1 });
      const redisLimiter = new RedisLimiter({ client, keyPrefix: prefix, pinnedNow: () => clock.now });
      const allKeys = [...new Set(trace.flatMap((st) => listLimitChecks(st).map((c) => counterKey(prefix, c.counter, c.spec))))];
      const model = new ReferenceModel('latest two');
      const redisModel = new ReferenceModel('each window');
      let denied = 0;
      let refusedWithAnAdmittingLimit = 0;
      try {
        for (let i = 0; i < trace.length; i++) {
          const st = trace[i]!;
          clock.now = st.now;
          const units = listModelUnits(st);
          const want = model.callUnits(units, st.now, st.stop);
          const wantOfRedis = redisModel.callUnits(units, st.now, st.stop);
          memory.sweep();
          const fromMemory = memory.checkNow(listLimitChecks(st), st.stop).map(plain);
          // Sent on the limiter's own connection, so it runs before the limiter's script call.
          void client.evalsha(expireSha, allKeys.length, ...allKeys, st.now);
          const fromRedis = (
            await redisLimiter.check(listLimitChecks(st), { deadline: Date.now() + 10_000, stopIncrementWhenOverLimit: st.stop })
          ).map(plain);
          if (JSON.stringify(fromMemory) !== JSON.stringify(want) || JSON.stringify(fromRedis) !== JSON.stringify(wantOfRedis)) {
            const lines = trace
              .slice(Math.max(0, i - 30), i + 1)
              .map(
                (t, k) =>
                  `  ${Math.max(0, i - 30) + k}: t=${t.now - TRACE_START}${t.stop ? ' STOP' : ''} ${t.units.map((u) => `#${u.descriptor} ${u.hits}h [${u.specs.map((sp) => `L${sp.limit} B${sp.burst}`).join(' ')}]`).join(', ')}`,
              );
            expect.fail(
              `lists, seed ${SEED}, step ${i}:\n${lines.join('\n')}\nmodel:  ${JSON.stringify(want)}\nmemory: ${JSON.stringify(fromMemory)}\nmodel (each window): ${JSON.stringify(wantOfRedis)}\nredis:  ${JSON.stringify(fromRedis)}`,
            );
          }
          denied += want.filter((r) => !r.allowed).length;
          let at = 0;
          for (const unit of units) {
            const mine = want.slice(at, at + unit.length);
            if (unit.length > 1 && mine.some((r) => !r.allowed) && mine.some((r) => r.allowed && unit[0]!.hits > 0))
              refusedWithAnAdmittingLimit++;
            at += unit.length;
          }
        }
      } finally {
        await Promise.all([memory.close(), redisLimiter.close()]);
      }
      console.info(
        `differential lists: ${trace.length} steps agree (${denied} denials, ${refusedWithAnAdmittingLimit} lists refused while a limit of theirs admitted)`,
      );
      expect(denied).toBeGreaterThan(trace.length / 20);
      expect(refusedWithAnAdmittingLimit).toBeGreaterThan(trace.length / 50);
    },
    60_000 + STEPS * 20,
  );
});

/**
 * What the counters answer to one call of units made through the local over-limit cache, given
 * which checks the cache answered. The cache answers a unit only whole, a single check or a list
 * every member of which it knows denied: it gets its look. A list with only some members known
 * goes to the counters as asked (refused there: each member its look with its hits, issue 27).
 * The other units go to the counters as asked; in STOP mode the cache answers a request only
 * whole, so with anything from the cache, nothing goes.
 */
function expectedUnitsThroughCache(
  model: ReferenceModel,
  units: readonly (readonly ModelCheck[])[],
  now: number,
  stop: boolean,
  fromCache: readonly boolean[],
): ModelResult[] {
  const out: ModelResult[][] = [];
  const missed: number[] = [];
  let at = 0;
  units.forEach((unit, u) => {
    const mine = fromCache.slice(at, at + unit.length);
    at += unit.length;
    if (mine.some(Boolean) && !mine.every(Boolean)) throw new Error('a list answered partly from the cache');
    if (mine.every(Boolean)) out[u] = model.look(unit, now);
    else missed.push(u);
  });
  // STOP mode: the backend's STOP rule over the whole request, cached counters included.
  if (stop && missed.length > 0) return model.callUnits(units, now, true);
  if (missed.length > 0) {
    const answers = model.callUnits(
      missed.map((u) => units[u]!),
      now,
      stop,
    );
    let k = 0;
    for (const u of missed) {
      out[u] = answers.slice(k, k + units[u]!.length);
      k += units[u]!.length;
    }
  }
  return out.flat();
}

describe("differential: rate_limits lists through the local over-limit cache (issue 27): every answer is the counters' own", () => {
  it(
    'mixed-algorithm lists, with and without STOP, on memory and through RedisLimiter',
    async () => {
      const seed = SEED + 300;
      console.info(`differential lists with the local cache: ${STEPS} steps, seed ${SEED} (DIFF_STEPS, DIFF_SEED to change)`);
      // No clock step back: the cache times its entries on a monotonic clock (as above).
      const { trace } = makeListTrace(seed, STEPS, false);
      const clock = { now: 0 };
      const memory = new MemoryLimiter({ now: () => clock.now, sweepIntervalMs: 3_600_000 });
      const prefix = `difflc${seed}:`;
      const client = new Redis({ host: server.host, port: server.port, maxRetriesPerRequest: 1 });
      const redisLimiter = new RedisLimiter({ client, keyPrefix: prefix, pinnedNow: () => clock.now });
      const allKeys = [...new Set(trace.flatMap((st) => listLimitChecks(st).map((c) => counterKey(prefix, c.counter, c.spec))))];
      const sides: CachedSide[] = [
        {
          name: 'memory',
          cache: new OverLimitCache(memory, { maxBytes: CACHE_BYTES, now: () => clock.now }),
          model: new ReferenceModel('latest two'),
          beforeCall: () => memory.sweep(),
          fromCache: 0,
        },
        {
          name: 'redis',
          cache: new OverLimitCache(redisLimiter, { maxBytes: CACHE_BYTES, now: () => clock.now }),
          model: new ReferenceModel('each window'),
          beforeCall: (now) => void client.evalsha(expireSha, allKeys.length, ...allKeys, now),
          fromCache: 0,
        },
      ];
      let listsFromCache = 0;
      let listsWithAKnownAndAnotherDenial = 0;
      try {
        for (let i = 0; i < trace.length; i++) {
          const st = trace[i]!;
          clock.now = st.now;
          const units = listModelUnits(st);
          for (const side of sides) {
            side.beforeCall(st.now);
            const got = (
              await side.cache.check(listLimitChecks(st), { deadline: Date.now() + 10_000, stopIncrementWhenOverLimit: st.stop })
            ).map((r) => ({ ...plain(r), fromLocalCache: r.fromLocalCache === true }));
            const fromCache = got.map((r) => r.fromLocalCache);
            const want = expectedUnitsThroughCache(side.model, units, st.now, st.stop, fromCache);
            side.fromCache += fromCache.filter(Boolean).length;
            if (
              JSON.stringify(got.map((r, k) => comparable(r, fromCache[k]!))) !==
              JSON.stringify(want.map((r, k) => comparable(r, fromCache[k]!)))
            ) {
              const lines = trace
                .slice(Math.max(0, i - 30), i + 1)
                .map(
                  (t, k) =>
                    `  ${Math.max(0, i - 30) + k}: t=${t.now - TRACE_START}${t.stop ? ' STOP' : ''} ${t.units.map((u) => `#${u.descriptor} ${u.hits}h [${u.specs.map((sp) => `${sp.algorithm}/${sp.windowSeconds}s L${sp.limit} B${sp.burst}`).join(' ')}]`).join(', ')}`,
                );
              expect.fail(
                `lists through the cache on ${side.name}, seed ${SEED}, step ${i} (${fromCache.map((f) => (f ? 'cache' : 'backend')).join(', ')}):\n${lines.join('\n')}\nmodel: ${JSON.stringify(want)}\ngot:   ${JSON.stringify(got)}`,
              );
            }
            if (side.name !== 'memory') continue;
            let at = 0;
            for (const unit of units) {
              const mine = got.slice(at, at + unit.length);
              at += unit.length;
              if (unit.length === 1) continue;
              if (mine.every((r) => r.fromLocalCache)) listsFromCache++;
              // Issue 27's case: a member known to deny every request (the cache keeps it) beside
              // another denying only these hits; the list then goes to the backend whole.
              else if (mine.some((r) => (r.blockedForMs ?? 0) > 0) && mine.some((r) => !r.allowed && !((r.blockedForMs ?? 0) > 0)))
                listsWithAKnownAndAnotherDenial++;
            }
          }
        }
      } finally {
        await Promise.all(sides.map((side) => side.cache.close()));
      }
      console.info(
        `differential lists with the local cache: ${trace.length} steps agree (from the cache: ${sides.map((s) => `${s.name} ${s.fromCache}`).join(', ')}; on memory ${listsFromCache} lists answered from the cache, ${listsWithAKnownAndAnotherDenial} with a limit known denied and another denying these hits)`,
      );
      // Worth something only if lists are answered from the cache, and some have a limit known
      // denied beside another denying the hits (issue 27's case).
      expect(listsFromCache).toBeGreaterThan(trace.length / 500);
      expect(listsWithAKnownAndAnotherDenial).toBeGreaterThan(trace.length / 100);
    },
    60_000 + STEPS * 20,
  );
});
