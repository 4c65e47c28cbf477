import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import Redis from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Limiter } from '../../src/limiter/limiter';
import { OverLimitCache } from '../../src/limiter/over-limit-cache';
import { RedisLimiter } from '../../src/limiter/redis/redis-limiter';
import { projectRoot, protoDir } from '../../src/base/paths';
import { startStandalone, type RedisProcess } from '../harness/redis-servers';
import { startTestApp, type TestApp } from '../helpers/test-app';

// The reference (envoyproxy/ratelimit) is the judge. scripts/record-reference-answers.mjs ran
// its binary against a real redis-server with a seeded random sequence of requests, once per
// mode (default, QUOTA_MODE, LOCAL_CACHE_SIZE_IN_BYTES, STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT,
// SHADOW_MODE; dynamic metadata and response headers on in each), and recorded each request,
// the instant it was sent and the answer in test/fixtures/reference/answers.json. CI has no
// reference binary; to record again, run that script where one is built.
//
// This test replays each sequence against floodgate with the Redis backend and the same
// settings and rule file, over gRPC, and compares the answers field by field.
//
// Time: the recorded rules use hour, day and week units (overrides also month and year), and
// floodgate's counting clock is pinned to the instant each request was sent to the reference,
// moved forward by REPLAY_SHIFT_MS, so both count in the same windows. The shift is a whole
// number of every window length (their least common multiple, about 42 years): the windows and
// every time until a reset stay as recorded, while the expiry the scripts give each key (an
// absolute instant on the pinned clock) stays in Redis' future. Without it, keys written for
// the recorded instants expire at once once real time passes them (hour windows two hours after
// recording), and the replay fails for reasons that have nothing to do with the answers. duration_until_reset (and the RateLimit-Reset header)
// comes from the reference's clock when it handled the call, a moment after it was sent: it may
// be one second less than floodgate's. That, and nothing more, is allowed.
//
// Deliberate differences (README, "Where floodgate differs from the reference") taken out of
// floodgate's answer before the comparison: the Retry-After header, added on OVER_LIMIT. The
// recorder keeps the sequences clear of the others: a limit override only on entries no rule
// limits, with one unit and limit per entries (the reference's key and local cache mix limits of
// one descriptor) and flat metadata (the reference merges into a rule's own nested maps). About
// one request in five names a counter twice (test/integration/stop-mode-repeated-counter.test.ts
// pins the STOP-mode cases these sequences rarely reach). Not recorded: STOP mode and the local
// over-limit cache together (10 of 160 answers differed when tried: floodgate's cache answers
// only the same counter, limit and hits, so a request the reference holds back because of a
// cached counter is charged here; open).
// Without the fix of issue 17 finding 1, 15 of the 160 quota-mode answers differ here.

interface Step {
  readonly at: number;
  readonly request: object;
  readonly res?: Answer;
  readonly err?: { code: number; details: string };
}
interface Answer {
  overall_code?: string;
  statuses?: { duration_until_reset?: { seconds?: number } }[];
  response_headers_to_add?: { key: string; value: string }[];
  dynamic_metadata?: unknown;
}
interface Mode {
  readonly name: string;
  readonly env: Record<string, string>;
  readonly steps: readonly Step[];
}
interface Fixture {
  readonly rules: string;
  readonly modes: readonly Mode[];
}

const FIXTURE = JSON.parse(readFileSync(join(projectRoot, 'test/fixtures/reference/answers.json'), 'utf8')) as Fixture;

// The recorder's client options, so both answers arrive in one shape: no defaults (an absent
// field is absent on both sides), plain oneof fields.
const CLIENT_OPTIONS: protoLoader.Options = {
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: false,
  oneofs: false,
  includeDirs: [protoDir],
};

type Unary = (request: object, options: grpc.CallOptions, callback: (err: grpc.ServiceError | null, res: Answer) => void) => void;
function rlsClient(address: string): grpc.Client & { ShouldRateLimit: Unary } {
  const definition = protoLoader.loadSync('envoy/service/ratelimit/v3/rls.proto', CLIENT_OPTIONS);
  const ctor = (
    grpc.loadPackageDefinition(definition) as unknown as {
      envoy: { service: { ratelimit: { v3: { RateLimitService: grpc.ServiceClientConstructor } } } };
    }
  ).envoy.service.ratelimit.v3.RateLimitService;
  return new ctor(address, grpc.credentials.createInsecure()) as unknown as grpc.Client & { ShouldRateLimit: Unary };
}

// google.protobuf.Struct → plain JSON, as the recorder stored the reference's metadata.
type WireValue = {
  structValue?: WireStruct;
  listValue?: { values?: WireValue[] };
  numberValue?: number;
  stringValue?: string;
  boolValue?: boolean;
};
type WireStruct = { fields?: Record<string, WireValue> };
function valueToPlain(v: WireValue): unknown {
  if (v.structValue !== undefined) return structToPlain(v.structValue);
  if (v.listValue !== undefined) return (v.listValue.values ?? []).map(valueToPlain);
  if (v.numberValue !== undefined) return v.numberValue;
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.boolValue !== undefined) return v.boolValue;
  return null;
}
function structToPlain(s: WireStruct): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(s.fields ?? {})) out[k] = valueToPlain(v);
  return out;
}

/**
 * Floodgate's answer made comparable with the reference's: metadata as plain JSON, Retry-After
 * left out, and where floodgate's reset time is one second more than the reference's (see the
 * header), the reference's value.
 */
function comparable(ours: Answer, theirs: Answer): Answer {
  const out: Answer = { ...ours };
  if (out.dynamic_metadata !== undefined) out.dynamic_metadata = structToPlain(out.dynamic_metadata as WireStruct);
  const oneSecondLater = (a: number | undefined, b: number | undefined) => a !== undefined && b !== undefined && a - b === 1;
  if (out.statuses !== undefined) {
    out.statuses = out.statuses.map((s, i) => {
      const seconds = s.duration_until_reset?.seconds;
      const theirSeconds = theirs.statuses?.[i]?.duration_until_reset?.seconds;
      return oneSecondLater(seconds, theirSeconds) ? { ...s, duration_until_reset: { seconds: theirSeconds } } : s;
    });
  }
  if (out.response_headers_to_add !== undefined) {
    const theirReset = theirs.response_headers_to_add?.find((h) => h.key === 'RateLimit-Reset')?.value;
    out.response_headers_to_add = out.response_headers_to_add
      .filter((h) => h.key !== 'Retry-After')
      .map((h) =>
        h.key === 'RateLimit-Reset' && oneSecondLater(Number(h.value), Number(theirReset)) ? { ...h, value: theirReset as string } : h,
      );
  }
  return out;
}

const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));
const lcm = (a: number, b: number): number => (a / gcd(a, b)) * b;
const DAY_S = 86_400;
// second, minute, hour, day, week, and the reference's 30-day month and 365-day year.
const REPLAY_SHIFT_MS = [1, 60, 3600, DAY_S, 7 * DAY_S, 30 * DAY_S, 365 * DAY_S].reduce(lcm) * 1000;

let redis: RedisProcess;
beforeAll(async () => {
  redis = await startStandalone();
}, 60_000);
afterAll(async () => {
  await redis?.stop();
}, 30_000);

describe.each(FIXTURE.modes.map((m) => [m.name, m] as const))('floodgate answers as the reference recorded, %s', (_name, mode) => {
  const clock = { now: 0 };
  let app: TestApp;
  let client: grpc.Client & { ShouldRateLimit: Unary };
  beforeAll(async () => {
    await redis.command('FLUSHALL');
    const redisClient = new Redis({ host: redis.host, port: redis.port, maxRetriesPerRequest: 1 });
    let limiter: Limiter = new RedisLimiter({ client: redisClient, keyPrefix: '', pinnedNow: () => clock.now });
    const cacheBytes = Number(mode.env.LOCAL_CACHE_SIZE_IN_BYTES ?? 0);
    if (cacheBytes > 0) limiter = new OverLimitCache(limiter, { maxBytes: cacheBytes, now: () => clock.now });
    app = await startTestApp(
      { 'rl.yaml': FIXTURE.rules },
      { ...mode.env, BACKEND_TYPE: 'redis', REDIS_URL: redis.url, REDIS_SOCKET_TYPE: 'tcp' },
      { limiter },
    );
    client = rlsClient(`127.0.0.1:${app.app.grpcPort}`);
  }, 30_000);
  afterAll(async () => {
    client?.close();
    await app?.stop();
  });

  it(`answers each of the recorded requests as the reference did`, async () => {
    const differences: string[] = [];
    for (const [i, step] of mode.steps.entries()) {
      clock.now = step.at + REPLAY_SHIFT_MS;
      const answer = await new Promise<{ res?: Answer; err?: { code: number; details: string } }>((resolve) =>
        client.ShouldRateLimit(step.request, { deadline: Date.now() + 5000 }, (err, res) =>
          resolve(err ? { err: { code: err.code, details: err.details } } : { res }),
        ),
      );
      const ours = answer.res !== undefined && step.res !== undefined ? comparable(answer.res, step.res) : answer;
      const theirs = step.res ?? { err: step.err };
      try {
        expect(ours).toEqual(theirs);
      } catch {
        differences.push(`#${i} ${JSON.stringify(step.request)}\n  reference: ${JSON.stringify(theirs)}\n  floodgate: ${JSON.stringify(ours)}`);
      }
    }
    expect(differences.length, `${differences.length} of ${mode.steps.length} answers differ:\n${differences.slice(0, 8).join('\n')}`).toBe(0);
  }, 60_000);
});
