#!/usr/bin/env node
// Records the reference's answers (envoyproxy/ratelimit) to a seeded random sequence of
// ShouldRateLimit requests, once per setting mode, into test/fixtures/reference/answers.json.
// test/integration/reference-replay.test.ts replays the same requests against floodgate, at the
// same instants, and compares the answers field by field. CI has no reference binary, so the
// answers are recorded here, by hand, and committed:
//
//   node scripts/record-reference-answers.mjs [--bin /work/scratch/bin/ratelimit] [--seed N]
//        [--requests 160] [--out test/fixtures/reference/answers.json]
//
// It starts its own redis-server (loopback, a free port, no persistence) and, for each mode,
// a reference process on loopback ports with USE_STATSD=false, REDIS_SOCKET_TYPE=tcp and the
// mode's settings. Every rule uses an hour, a day or a longer unit, so a mode's sequence (a few
// seconds) stays inside one window; the recorder waits when the next hour boundary is less than
// two minutes away. The instant each request was sent is recorded, and the replay pins
// floodgate's clock to it.
import { spawn } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import Redis from 'ioredis';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

function option(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : fallback;
}
const BIN = option('bin', '/work/scratch/bin/ratelimit');
const SEED = Number(option('seed', '20261126'));
const REQUESTS = Number(option('requests', '160'));
const OUT = resolve(ROOT, option('out', 'test/fixtures/reference/answers.json'));

/** The rules of every mode: hour, day and week units only (see the header). */
const RULES = `domain: rl
descriptors:
  - key: user
    rate_limit: { name: per_user, unit: hour, requests_per_unit: 3 }
  - key: plan
    value: premium
    rate_limit: { name: premium, unit: hour, requests_per_unit: 6, replaces: [{ name: per_user }] }
  - key: free
    rate_limit: { name: free_tier, unlimited: true }
  - key: vip
    rate_limit: { name: vip, unit: day, requests_per_unit: 4, replaces: [{ name: free_tier }] }
  - key: path
    value: /api/*
    metadata: { team: api, big: 9007199254740993 }
    rate_limit: { unit: hour, requests_per_unit: 4 }
    descriptors:
      - key: method
        value: POST
        metadata: { team: api-post, tier: 2 }
        rate_limit: { unit: hour, requests_per_unit: 2 }
  - key: path
    rate_limit: { unit: day, requests_per_unit: 5 }
  - key: shadow
    shadow_mode: true
    rate_limit: { unit: hour, requests_per_unit: 1 }
  - key: quota
    quota_mode: true
    metadata: { quota: true }
    rate_limit: { unit: hour, requests_per_unit: 2 }
  - key: zero
    rate_limit: { unit: day, requests_per_unit: 0 }
  - key: detailed
    detailed_metric: true
    rate_limit: { unit: hour, requests_per_unit: 2 }
  - key: nolimit
    descriptors:
      - key: inner
        rate_limit: { unit: week, requests_per_unit: 3 }
`;

/** Settings of every mode; the replay gives floodgate the same. */
const COMMON = { RESPONSE_DYNAMIC_METADATA: 'true', LIMIT_RESPONSE_HEADERS_ENABLED: 'true' };
const MODES = [
  { name: 'default', env: {} },
  { name: 'quota', env: { QUOTA_MODE: 'true' } },
  { name: 'local-cache', env: { LOCAL_CACHE_SIZE_IN_BYTES: '1048576' } },
  { name: 'stop', env: { STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: 'true' } },
  { name: 'shadow', env: { SHADOW_MODE: 'true' } },
];

/** The client's proto-loader options; the replay's client uses the same, so answers have one shape. */
export const CLIENT_OPTIONS = {
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: false,
  oneofs: false,
  includeDirs: [join(ROOT, 'proto')],
};

// --- seeded randomness (mulberry32) ---
function rng(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n) => Math.floor(next() * n);
  return { int, pick: (xs) => xs[int(xs.length)], chance: (p) => next() < p };
}

const entries = (...pairs) => pairs.map(([key, value]) => ({ key, value }));

// A limit override goes only on entries that no rule limits (or an unlimited rule), each with a
// unit and a limit of its own. Two limits on one counter meet the reference's key, which names a counter's
// window start but not its length or limit: two units share a count whenever their windows start
// at the same second (a DAY and a WEEK limit on the first day of an epoch week), and its local
// over-limit cache, once one limit was exceeded, denies every other limit on the counter.
// floodgate keeps them apart on purpose (README, "Where floodgate differs from the reference");
// test/unit/service/reference-judged-answers.test.ts covers overrides on ruled descriptors.
function randomDescriptor(r) {
  const u = () => r.pick(['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h']);
  const ruled = [
    () => entries(['user', u()]),
    () => entries(['user', u()]),
    () => entries(['plan', 'premium']),
    () => entries(['vip', r.pick(['1', '2'])]),
    () => entries(['path', r.pick(['/api/users', '/api/orders'])]),
    () => entries(['path', r.pick(['/api/users', '/api/orders'])], ['method', 'POST']),
    () => entries(['path', r.pick(['/home', '/about'])]),
    () => entries(['shadow', r.pick(['s1', 's2'])]),
    () => entries(['quota', r.pick(['q1', 'q2', 'q3'])]),
    () => entries(['zero', 'z']),
    () => entries(['detailed', r.pick(['d1', 'd2', 'd3'])]),
    () => entries(['nolimit', 'n'], ['inner', r.pick(['i1', 'i2'])]),
  ];
  // [requests_per_unit, unit, entries] (units HOUR 3, DAY 4, MONTH 5, YEAR 6, and 7, which the
  // reference enforces as WEEK).
  const unruled = [
    [2, 4, () => entries(['plan', 'basic'])],
    [3, 7, () => entries(['free', '1'])],
    [0, 7, () => entries(['free', '2'])],
    [1, 3, () => entries(['path', '/api/users'], ['method', 'GET'])],
    [2, 5, () => entries(['nolimit', 'n'])],
    [3, 6, () => entries(['whitelisted', '1'])],
    [3, 7, () => []],
  ];
  let d;
  if (r.chance(0.7)) d = { entries: r.pick(ruled)() };
  else {
    const [limit, unit, make] = r.pick(unruled);
    d = { entries: make() };
    if (r.chance(0.4)) d.limit = { requests_per_unit: limit, unit };
  }
  if (r.chance(0.15)) d.hits_addend = { value: r.int(4) };
  return d;
}

// One request in five also names one of its counters a second time, with hits of its own: the
// reference answers each occurrence with the counter's value after the increments before it
// (in STOP mode, after those of the occurrences that were not held back).
function randomRequest(r) {
  const descriptors = [];
  for (let n = 1 + r.int(3); descriptors.length < n;) descriptors.push(randomDescriptor(r));
  if (r.chance(0.2)) {
    const again = { ...r.pick(descriptors) };
    delete again.hits_addend;
    if (r.chance(0.5)) again.hits_addend = { value: r.int(4) };
    descriptors.splice(r.int(descriptors.length + 1), 0, again);
  }
  const request = { domain: r.chance(0.04) ? 'unknown' : 'rl', descriptors };
  if (r.chance(0.25)) request.hits_addend = r.int(4);
  return request;
}

// --- the answer in plain JSON (Struct → plain object, so the fixture stays small) ---
function valueToPlain(v) {
  if ('structValue' in v) return structToPlain(v.structValue);
  if ('listValue' in v) return (v.listValue.values ?? []).map(valueToPlain);
  if ('numberValue' in v) return v.numberValue;
  if ('stringValue' in v) return v.stringValue;
  if ('boolValue' in v) return v.boolValue;
  return null;
}
function structToPlain(s) {
  const out = {};
  for (const [k, v] of Object.entries(s.fields ?? {})) out[k] = valueToPlain(v);
  return out;
}
export function plainAnswer(response) {
  const out = { ...response };
  if (out.dynamic_metadata) out.dynamic_metadata = structToPlain(out.dynamic_metadata);
  return out;
}

/** JSON with one line per step, so that a new recording reads as a diff. */
function fixtureText({ modes, ...head }) {
  const modeText = ({ steps, ...rest }) =>
    `${JSON.stringify(rest).slice(0, -1)},"steps":[\n${steps.map((st) => JSON.stringify(st)).join(',\n')}\n]}`;
  return `${JSON.stringify(head).slice(0, -1)},"modes":[\n${modes.map(modeText).join(',\n')}\n]}\n`;
}

// --- processes ---
function freePort() {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.on('error', fail);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => ok(port));
    });
  });
}

async function until(what, fn, timeoutMs = 15000) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      if (Date.now() > end) throw new Error(`${what} did not come up: ${err.message}`, { cause: err });
      await sleep(100);
    }
  }
}

function call(client, request) {
  return new Promise((ok) =>
    client.ShouldRateLimit(request, { deadline: Date.now() + 5000 }, (err, res) =>
      ok(err ? { err: { code: err.code, details: err.details } } : { res: plainAnswer(res) }),
    ),
  );
}

/** Waits when the next hour boundary is less than two minutes away, so a mode stays in one hour. */
async function awayFromHourEdge() {
  const left = 3_600_000 - (Date.now() % 3_600_000);
  if (left < 120_000) {
    console.error(`waiting ${Math.ceil(left / 1000) + 2} s for the hour to turn`);
    await sleep(left + 2000);
  }
}

async function main() {
  const definition = protoLoader.loadSync('envoy/service/ratelimit/v3/rls.proto', CLIENT_OPTIONS);
  const Client = grpc.loadPackageDefinition(definition).envoy.service.ratelimit.v3.RateLimitService;
  const dir = mkdtempSync(join(tmpdir(), 'reference-answers-'));
  mkdirSync(join(dir, 'config'));
  writeFileSync(join(dir, 'config', 'rl.yaml'), RULES);
  const redisPort = await freePort();
  const redis = spawn('redis-server', ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    stdio: 'ignore',
  });
  const children = [redis];
  const cleanup = () => {
    for (const c of children) if (c.exitCode === null) c.kill('SIGTERM');
    rmSync(dir, { recursive: true, force: true });
  };
  process.on('exit', cleanup);
  const admin = new Redis({ host: '127.0.0.1', port: redisPort, lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null });
  admin.on('error', () => {}); // until() reports a server that never comes up
  await until('redis-server', () => admin.connect());
  const modes = [];
  try {
    for (let m = 0; m < MODES.length; m++) {
      const mode = MODES[m];
      await admin.flushall();
      await awayFromHourEdge();
      const [grpcPort, httpPort, debugPort] = [await freePort(), await freePort(), await freePort()];
      const env = {
        PATH: process.env.PATH,
        USE_STATSD: 'false',
        LOG_LEVEL: 'ERROR',
        REDIS_SOCKET_TYPE: 'tcp',
        REDIS_URL: `127.0.0.1:${redisPort}`,
        RUNTIME_ROOT: dir,
        RUNTIME_SUBDIRECTORY: '.',
        RUNTIME_WATCH_ROOT: 'false',
        HOST: '127.0.0.1',
        PORT: String(httpPort),
        DEBUG_HOST: '127.0.0.1',
        DEBUG_PORT: String(debugPort),
        GRPC_HOST: '127.0.0.1',
        GRPC_PORT: String(grpcPort),
        ...COMMON,
        ...mode.env,
      };
      const reference = spawn(BIN, [], { env, stdio: 'ignore' });
      children.push(reference);
      const client = new Client(`127.0.0.1:${grpcPort}`, grpc.credentials.createInsecure());
      // A call to a domain no rule names counts nothing; it answers once the server is up.
      await until(`the reference (${mode.name})`, async () => {
        const probe = await call(client, { domain: 'readiness-probe', descriptors: [{ entries: [{ key: 'k', value: 'v' }] }] });
        if (probe.err) throw new Error(probe.err.details);
      });
      const r = rng(SEED + m);
      const steps = [];
      for (let i = 0; i < REQUESTS; i++) {
        const request = randomRequest(r);
        const at = Date.now();
        steps.push({ at, request, ...(await call(client, request)) });
      }
      client.close();
      reference.kill('SIGTERM');
      await new Promise((ok) => (reference.exitCode !== null ? ok() : reference.once('exit', ok)));
      modes.push({ name: mode.name, env: { ...COMMON, ...mode.env }, seed: SEED + m, steps });
      console.error(`${mode.name}: ${steps.length} requests, ${steps.filter((s) => s.res?.overall_code === 'OVER_LIMIT').length} OVER_LIMIT`);
    }
  } finally {
    admin.disconnect();
  }
  const fixture = {
    about:
      'Answers of envoyproxy/ratelimit (the reference) to seeded random requests, one sequence per mode, recorded by scripts/record-reference-answers.mjs; replayed by test/integration/reference-replay.test.ts.',
    recordedWith: BIN,
    rules: RULES,
    modes,
  };
  mkdirSync(dirname(OUT), { recursive: true });
  writeFileSync(OUT, fixtureText(fixture));
  console.error(`wrote ${OUT}`);
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
