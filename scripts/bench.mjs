#!/usr/bin/env node
// floodgate's benchmark: ghz against the real server on loopback, three scenarios on every
// backend plus a bare grpc-js server, in one run with alternating rounds. See bench/RESULTS.md.
//
//   node scripts/bench.mjs                  the working tree (npm run bench)
//   node scripts/bench.mjs --compare <ref>  <ref> (built from `git archive`) against the working tree
//   node scripts/bench.mjs --reference <binary>
//                                          also envoyproxy/ratelimit's binary on the same Redis
//                                          backends (standalone, cluster), side by side
//   BENCH_QUICK=1 node scripts/bench.mjs    a fast check: 1 short round
//
// Settings (environment): BENCH_DURATION (s, 3; QUICK 2), BENCH_ROUNDS (5; QUICK 1),
// BENCH_WARMUP (s, 1.5), BENCH_CONCURRENCY (50), BENCH_CONNECTIONS (4),
// BENCH_BACKENDS (memory,redis,cluster), BENCH_SCENARIOS (uniform,multi3,hot; limit1,limit1s,limit2,limit2hot with
// BENCH_ENV="RUNTIME_ROOT=$PWD/bench/rules-lists", floodgate only),
// BENCH_LATENCY (1: also the latency mode at half the saturated throughput; 0 to skip),
// BENCH_RATE (req/s: every round at this rate, ghz -r, instead of as fast as the server answers),
// BENCH_RATIOS (scenario pairs, "limit2/limit1,limit2/limit1s": per target, the median over the
// rounds of one scenario's CPU per call ÷ the other's in the same round, server and Redis),
// BENCH_ENV (extra server settings, e.g. "WORKERS=2"),
// BENCH_FRESH (1: a new server process for every sample, warmed up for BENCH_WARMUP, instead of
// one long-lived server per target; steadier on a noisy machine, where a long-lived server's
// heap and JIT state carry one scenario's history into the next).
//
// Figures per scenario and target, medians over the rounds: req/s, p50, p99, server CPU per call
// (user + system time of every process of the server, from /proc), Redis CPU per call (every
// redis-server of the backend, from /proc), and the server CPU per call as a ratio to the bare
// server's (the median of the per-round ratios: each round runs both back to back); with
// --compare also the after side's ratio to the before side on the same backend; with --reference
// a leading side-by-side table, floodgate ÷ reference per round (medians of those ratios), and
// the latency mode for both at half the reference's saturated rate.
// Writes bench/results/<date>.md and .json.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync, existsSync } from 'node:fs';
import { createServer, createConnection } from 'node:net';
import { get as httpGet } from 'node:http';
import { tmpdir, cpus, loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout } from 'node:timers';
import { latencyFigures, parseRates, parseScrape, runtimeDelta, ENVOY_TIMEOUT_MS, GHZ_CUT } from './bench-stats.mjs';

const ROOT = resolve(import.meta.dirname, '..');
const QUICK = process.env.BENCH_QUICK === '1';
// Many short rounds rather than few long ones: on a shared machine the median of many
// adjacent pairs is steadier than a few long samples.
const DURATION = Number(process.env.BENCH_DURATION ?? (QUICK ? 2 : 3));
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? (QUICK ? 1 : 5));
const WARMUP = Number(process.env.BENCH_WARMUP ?? (QUICK ? 0.5 : 1.5));
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 50);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 4);
const BACKENDS = (process.env.BENCH_BACKENDS ?? 'memory,redis,cluster').split(',').filter(Boolean);
const SCENARIOS = (process.env.BENCH_SCENARIOS ?? 'uniform,multi3,hot').split(',').filter(Boolean);
const LATENCY = process.env.BENCH_LATENCY !== '0';
const RATE = process.env.BENCH_RATE ? Number(process.env.BENCH_RATE) : undefined;
if (RATE !== undefined && !(RATE >= 1)) throw new Error(`BENCH_RATE must be a rate >= 1 req/s, got ${process.env.BENCH_RATE}`);
const RATIOS = (process.env.BENCH_RATIOS ?? '')
  .split(',')
  .filter(Boolean)
  .map((pair) => {
    const [a, b] = pair.split('/');
    if (!SCENARIOS.includes(a) || !SCENARIOS.includes(b))
      throw new Error(`BENCH_RATIOS: ${pair} needs two scenarios of this run (${SCENARIOS.join(',')})`);
    return [a, b];
  });
const FRESH = process.env.BENCH_FRESH === '1';
const EXTRA_ENV = Object.fromEntries(
  (process.env.BENCH_ENV ?? '')
    .split(/\s+/)
    .filter(Boolean)
    .map((kv) => kv.split(/=(.*)/s).slice(0, 2)),
);
// BENCH_REFERENCE_ENV: extra settings of the reference server (e.g. "REDIS_PIPELINE_WINDOW=75us").
const EXTRA_REFERENCE_ENV = Object.fromEntries(
  (process.env.BENCH_REFERENCE_ENV ?? '')
    .split(/\s+/)
    .filter(Boolean)
    .map((kv) => kv.split(/=(.*)/s).slice(0, 2)),
);
const GHZ_VERSION = 'v0.93.0';
const CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim());
// Generous: a sick run must not hang the machine.
const GHZ_TIMEOUT_MS = (DURATION + 30) * 1000;

const key = '{{randomInt 0 10000}}';
const REQUESTS = {
  // 10,000 keys, one descriptor of two entries.
  uniform: {
    domain: 'bench',
    descriptors: [
      {
        entries: [
          { key: 'tenant', value: `t${key}` },
          { key: 'path', value: '/a' },
        ],
      },
    ],
  },
  // Three descriptors per request, each its own counter.
  multi3: {
    domain: 'bench',
    descriptors: [
      {
        entries: [
          { key: 'tenant', value: `t${key}` },
          { key: 'path', value: '/a' },
        ],
      },
      { entries: [{ key: 'client', value: `c${key}` }] },
      { entries: [{ key: 'user', value: `u${key}` }] },
    ],
  },
  // One key over its limit (1 per hour); the local over-limit cache answers.
  hot: { domain: 'bench', descriptors: [{ entries: [{ key: 'hot', value: 'h' }] }] },
  // Issue 21, with the rules of bench/rules-lists (floodgate only): 10,000 keys, one limit each,
  // against 10,000 keys with a `rate_limits` list of two limits each.
  limit1: { domain: 'bench', descriptors: [{ entries: [{ key: 'one', value: `o${key}` }] }] },
  // The list's first limit (per second) alone: what the list adds beyond its windows.
  limit1s: { domain: 'bench', descriptors: [{ entries: [{ key: 'one_second', value: `s${key}` }] }] },
  limit2: { domain: 'bench', descriptors: [{ entries: [{ key: 'two', value: `w${key}` }] }] },
  // One key's list, refused by its burst limit but for a second's first call: the over-limit
  // cache answers the burst, and the list's other limit is read in Redis (hits 0, merged).
  limit2hot: { domain: 'bench', descriptors: [{ entries: [{ key: 'hot_list', value: 'h' }] }] },
};

const children = [];
const tempDirs = [];
function cleanup() {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const d of tempDirs) rmSync(d, { recursive: true, force: true });
}
process.on('exit', cleanup);
for (const sig of ['SIGINT', 'SIGTERM']) process.once(sig, () => process.exit(130));

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const log = (msg) => process.stderr.write(`${msg}\n`);

function freePort() {
  return new Promise((res, rej) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => res(port));
    });
    s.on('error', rej);
  });
}

async function waitForPort(port, timeoutMs = 20_000) {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    const ok = await new Promise((res) => {
      const c = createConnection({ host: '127.0.0.1', port }, () => (c.end(), res(true)));
      c.on('error', () => res(false));
    });
    if (ok) return;
    await sleep(100);
  }
  throw new Error(`nothing listens on 127.0.0.1:${port} after ${timeoutMs} ms`);
}

function ghzBinary() {
  const onPath = spawnSync('sh', ['-c', 'command -v ghz']).stdout.toString().trim();
  if (onPath) return onPath;
  const gopath = execFileSync('go', ['env', 'GOPATH']).toString().trim();
  const bin = join(gopath, 'bin', 'ghz');
  if (!existsSync(bin)) {
    log(`installing ghz ${GHZ_VERSION} with go install`);
    execFileSync('go', ['install', `github.com/bojand/ghz/cmd/ghz@${GHZ_VERSION}`], { stdio: 'inherit' });
  }
  return bin;
}

// --- CPU from /proc -------------------------------------------------------------------------

function procStat(pid) {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name may contain spaces: fields start after the last ')'.
    const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return { ppid: Number(f[1]), cpu: (Number(f[11]) + Number(f[12])) / CLK_TCK };
  } catch {
    return undefined;
  }
}

/** CPU seconds of `pid` and all its descendants (a WORKERS>1 server is a process tree). */
function treeCpu(pid) {
  const byParent = new Map();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const st = procStat(name);
    if (!st) continue;
    if (!byParent.has(st.ppid)) byParent.set(st.ppid, []);
    byParent.get(st.ppid).push(Number(name));
  }
  let total = 0;
  const stack = [pid];
  while (stack.length > 0) {
    const p = stack.pop();
    total += procStat(p)?.cpu ?? 0;
    stack.push(...(byParent.get(p) ?? []));
  }
  return total;
}

const sumCpu = (pids) => pids.reduce((s, p) => s + treeCpu(p), 0);

// --- builds ---------------------------------------------------------------------------------

function buildSide(name, ref) {
  if (ref === undefined) {
    log(`building the working tree`);
    execFileSync('npx', ['tsc', '-p', 'tsconfig.build.json'], { cwd: ROOT, stdio: 'inherit' });
    return { name, ref: 'working tree', commit: gitHead(), dir: ROOT };
  }
  const dir = mkdtempSync(join(tmpdir(), `floodgate-bench-${name}-`));
  tempDirs.push(dir);
  log(`building ${ref} in ${dir}`);
  // git archive: a plain copy of the ref, no worktree bookkeeping in the shared repository.
  execFileSync('sh', ['-c', `git archive --format=tar "$1" | tar -x -C "$2"`, 'sh', ref, dir], { cwd: ROOT, stdio: 'inherit' });
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
  execFileSync(join(ROOT, 'node_modules', '.bin', 'tsc'), ['-p', 'tsconfig.build.json'], { cwd: dir, stdio: 'inherit' });
  const commit = execFileSync('git', ['rev-parse', '--short', ref], { cwd: ROOT }).toString().trim();
  return { name, ref, commit, dir };
}

function gitHead() {
  const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT }).toString().trim();
  const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no', '--', 'src', 'scripts', 'lua'], { cwd: ROOT })
    .toString()
    .trim();
  return dirty ? `${head}+changes` : head;
}

// --- Redis ----------------------------------------------------------------------------------

async function startRedis(port, dir, extra = []) {
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--logfile', '', ...extra],
    {
      stdio: 'ignore',
    },
  );
  children.push(child);
  await waitForPort(port);
  return child;
}

async function startStandaloneRedis() {
  const dir = mkdtempSync(join(tmpdir(), 'floodgate-bench-redis-'));
  tempDirs.push(dir);
  const port = await freePort();
  const child = await startRedis(port, dir);
  return { url: `127.0.0.1:${port}`, pids: [child.pid], ports: [port], env: { REDIS_URL: `127.0.0.1:${port}` } };
}

async function startClusterRedis() {
  const nodes = [];
  for (let i = 0; i < 3; i++) {
    const dir = mkdtempSync(join(tmpdir(), `floodgate-bench-cluster${i}-`));
    tempDirs.push(dir);
    const port = await freePort();
    const child = await startRedis(port, dir, [
      '--cluster-enabled',
      'yes',
      '--cluster-config-file',
      join(dir, 'nodes.conf'),
      '--cluster-node-timeout',
      '2000',
    ]);
    nodes.push({ port, pid: child.pid });
  }
  const seeds = nodes.map((n) => `127.0.0.1:${n.port}`);
  execFileSync('redis-cli', ['--cluster', 'create', ...seeds, '--cluster-replicas', '0', '--cluster-yes'], { stdio: 'ignore', timeout: 60_000 });
  const until = Date.now() + 30_000;
  for (;;) {
    const ok = nodes.every((n) => /cluster_state:ok/.test(spawnSync('redis-cli', ['-p', String(n.port), 'cluster', 'info']).stdout.toString()));
    if (ok) break;
    if (Date.now() > until) throw new Error('the bench cluster did not reach cluster_state:ok');
    await sleep(200);
  }
  return {
    url: seeds.join(','),
    pids: nodes.map((n) => n.pid),
    ports: nodes.map((n) => n.port),
    env: { REDIS_TYPE: 'CLUSTER', REDIS_URL: seeds.join(',') },
  };
}

// --- servers --------------------------------------------------------------------------------

async function startFloodgate(side, backend, redis, variant = { name: side.name, nodeArgs: [], env: {} }) {
  const port = await freePort();
  const debugPort = await freePort();
  const env = {
    ...process.env,
    ...(redis?.env ?? { BACKEND_TYPE: 'memory' }),
    RUNTIME_ROOT: join(ROOT, 'bench', 'rules'),
    RUNTIME_WATCH_ROOT: 'false',
    LOG_LEVEL: 'ERROR',
    GRPC_HOST: '127.0.0.1',
    GRPC_PORT: String(port),
    HOST: '127.0.0.1',
    PORT: '0',
    // /metrics on the debug port: the rate mode scrapes it before and after each round.
    DEBUG_HOST: '127.0.0.1',
    DEBUG_PORT: String(debugPort),
    USE_PROMETHEUS: 'false',
    // Only the hot scenario's counter is ever over its limit, so the cache is idle elsewhere.
    LOCAL_CACHE_SIZE_IN_BYTES: '1048576',
    ...EXTRA_ENV,
    ...variant.env,
  };
  const nodeArgs = [...(process.env.BENCH_NODE_ARGS ?? '').split(/\s+/).filter(Boolean), ...variant.nodeArgs];
  const child = spawn(process.execPath, [...nodeArgs, join(side.dir, 'dist', 'src', 'main.js')], {
    env,
    stdio: ['ignore', 'ignore', 'inherit'],
    cwd: side.dir,
  });
  children.push(child);
  await waitForPort(port);
  return {
    name: `${variant.name}/${backend}`,
    side: side.name,
    variant: { name: variant.name, nodeArgs, env: variant.env },
    backend,
    port,
    metricsUrl: `http://127.0.0.1:${debugPort}/metrics`,
    pid: child.pid,
    redisPids: redis?.pids ?? [],
    redisPorts: redis?.ports ?? [],
    child,
    start: () => startFloodgate(side, backend, redis, variant),
  };
}

/**
 * envoyproxy/ratelimit built from source, on the same Redis and the same rule file (bench/rules
 * is in its format: RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config/*.yaml).
 */
async function startReference(binary, backend, redis) {
  const [port, httpPort, debugPort] = [await freePort(), await freePort(), await freePort()];
  const env = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    USE_STATSD: 'false',
    LOG_LEVEL: 'error',
    REDIS_SOCKET_TYPE: 'tcp',
    REDIS_URL: redis.url,
    ...(backend === 'cluster' ? { REDIS_TYPE: 'cluster' } : {}),
    RUNTIME_ROOT: join(ROOT, 'bench'),
    RUNTIME_SUBDIRECTORY: 'rules',
    RUNTIME_WATCH_ROOT: 'false',
    GRPC_HOST: '127.0.0.1',
    GRPC_PORT: String(port),
    HOST: '127.0.0.1',
    PORT: String(httpPort),
    DEBUG_HOST: '127.0.0.1',
    DEBUG_PORT: String(debugPort),
    LOCAL_CACHE_SIZE_IN_BYTES: '1048576',
    ...EXTRA_REFERENCE_ENV,
  };
  // stderr ignored: with USE_STATSD=false its stats go to a debug log on stderr every 10 s.
  const child = spawn(binary, [], { env, stdio: 'ignore' });
  children.push(child);
  await waitForPort(port);
  return {
    name: `reference/${backend}`,
    side: 'reference',
    backend,
    port,
    pid: child.pid,
    redisPids: redis.pids,
    redisPorts: redis.ports,
    child,
    start: () => startReference(binary, backend, redis),
  };
}

async function startBare() {
  const port = await freePort();
  const child = spawn(process.execPath, [join(ROOT, 'scripts', 'bench-bare-server.js')], {
    env: { ...process.env, GRPC_PORT: String(port) },
    stdio: ['ignore', 'ignore', 'ignore'],
  });
  children.push(child);
  await waitForPort(port);
  return { name: 'bare', side: 'bare', backend: '-', port, pid: child.pid, redisPids: [], redisPorts: [], child, start: startBare };
}

// --- ghz ------------------------------------------------------------------------------------

function ghz(bin, target, scenario, seconds, rate) {
  const args = [
    '--insecure',
    '--proto',
    'proto/envoy/service/ratelimit/v3/rls.proto',
    '--import-paths',
    'proto',
    '--call',
    'envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit',
    '-d',
    JSON.stringify(REQUESTS[scenario]),
    '-c',
    String(CONCURRENCY),
    '--connections',
    String(CONNECTIONS),
    '-z',
    `${seconds}s`,
    '-O',
    'json',
    ...(rate ? ['-r', String(rate)] : []),
    `127.0.0.1:${target.port}`,
  ];
  const commands0 = redisCommands(target.redisPorts);
  const cpu0 = treeCpu(target.pid);
  const redis0 = sumCpu(target.redisPids);
  const out = spawnSync(bin, args, { cwd: ROOT, timeout: GHZ_TIMEOUT_MS, maxBuffer: 1024 * 1024 * 1024 });
  const cpu1 = treeCpu(target.pid);
  const redis1 = sumCpu(target.redisPids);
  const commands1 = redisCommands(target.redisPorts);
  if (out.status !== 0 && !out.stdout.length) throw new Error(`ghz failed on ${target.name}: ${out.stderr.toString()}`);
  const report = JSON.parse(out.stdout.toString());
  const pct = (p) => (report.latencyDistribution ?? []).find((d) => d.percentage === p)?.latency / 1e6;
  // ghz -z cuts the calls in flight when time is up: those are not server errors.
  const errors = Object.entries(report.errorDistribution ?? {})
    .filter(([msg]) => !GHZ_CUT.test(msg))
    .reduce((s, [, n]) => s + n, 0);
  const ok = report.statusCodeDistribution?.OK ?? report.count;
  // From every call's latency, the first 0.5 s (ghz connecting) left out: see bench-stats.mjs.
  const lat = latencyFigures(report);
  return {
    rps: report.rps,
    p50: lat.p50 ?? pct(50),
    p99: lat.p99 ?? pct(99),
    p999: lat.p999,
    overShare: lat.overShare,
    maxMs: lat.max,
    calls: ok,
    errors,
    cpuUs: ((cpu1 - cpu0) * 1e6) / ok,
    redisUs: target.redisPids.length ? ((redis1 - redis0) * 1e6) / ok : undefined,
    // Commands Redis ran per call: a script call is one however many counters it serves.
    redisCommandsPerCall: target.redisPorts.length ? (commands1.all - commands0.all) / ok : undefined,
    redisScriptsPerCall: target.redisPorts.length ? (commands1.scripts - commands0.scripts) / ok : undefined,
  };
}

/**
 * Commands the Redis servers on `ports` have run (INFO commandstats, which also counts the
 * commands a script runs; the INFO calls themselves left out), and of them the script calls.
 */
function redisCommands(ports) {
  let all = 0;
  let scripts = 0;
  for (const port of ports) {
    const info = spawnSync('redis-cli', ['-p', String(port), 'INFO', 'commandstats']).stdout.toString();
    for (const m of info.matchAll(/^cmdstat_([a-z|]+):calls=(\d+)/gm)) {
      if (m[1] !== 'info') all += Number(m[2]);
      if (m[1] === 'evalsha' || m[1] === 'eval') scripts += Number(m[2]);
    }
  }
  return { all, scripts };
}

const median = (xs) => {
  const v = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return undefined;
  const m = Math.floor(v.length / 2);
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
};

// --- report ---------------------------------------------------------------------------------

const f0 = (x) => (x === undefined ? '–' : x.toFixed(0));
const f1 = (x) => (x === undefined ? '–' : x.toFixed(1));
const f2 = (x) => (x === undefined ? '–' : x.toFixed(2));

function markdown(result) {
  const lines = [];
  lines.push(`# floodgate benchmark ${result.date}`, '');
  lines.push(
    `- machine: ${result.machine.nproc} cores, ${result.machine.cpu}, node ${result.machine.node}, ${result.machine.redis}, ghz ${GHZ_VERSION}`,
  );
  lines.push(`- load average at start / end: ${result.machine.loadStart.map(f2).join(' ')} / ${result.machine.loadEnd.map(f2).join(' ')}`);
  lines.push(
    `- settings: ghz -c ${CONCURRENCY} --connections ${CONNECTIONS}${result.settings.rate ? ` -r ${result.settings.rate}` : ''}, ${result.settings.rounds} alternating rounds of ${result.settings.duration} s per scenario and target (after a ${result.settings.warmup} s warm-up${result.settings.fresh ? ', each on a new server process (BENCH_FRESH)' : ''}), server env: ${JSON.stringify(result.settings.env)}, LOCAL_CACHE_SIZE_IN_BYTES=1048576`,
  );
  lines.push(`- sides: ${result.sides.map((s) => `${s.name} = ${s.ref} (${s.commit})`).join(', ')}`);
  lines.push(
    '',
    'Medians over the rounds. CPU per call: user + system time of every process of the server (or of every redis-server of the backend) over the round, divided by the calls answered. "× bare": the median of the per-round ratios of server CPU per call to the bare grpc-js server\'s' +
      (result.sides.length > 1 ? '; "× before": the same against the before side on the same backend.' : '.'),
    '',
  );
  if (result.reference) lines.push(...sideBySide(result));
  for (const scenario of result.settings.scenarios) {
    lines.push(`## ${scenario}`, '');
    const compare = result.sides.length > 1;
    lines.push(
      `| target | req/s | p50 ms | p99 ms | server CPU µs/call | × bare |${compare ? ' × before |' : ''} Redis CPU µs/call | Redis commands (scripts) per call | errors |`,
    );
    lines.push(`|---|---|---|---|---|---|${compare ? '---|' : ''}---|---|---|`);
    for (const row of result.rows.filter((r) => r.scenario === scenario)) {
      const vsBefore = compare ? ` ${f2(row.ratioToBefore)} |` : '';
      lines.push(
        `| ${row.target} | ${f0(row.rps)} | ${f1(row.p50)} | ${f1(row.p99)} | ${f0(row.cpuUs)} | ${f2(row.ratio)} |${vsBefore} ${f1(row.redisUs)} | ${f2(row.redisCommandsPerCall)} (${f2(row.redisScriptsPerCall)}) | ${row.errors} |`,
      );
    }
    lines.push('');
  }
  if (result.ratios.length) {
    lines.push('## scenario against scenario', '');
    lines.push("Per target, the median over the rounds of the first scenario's CPU per call ÷ the second's in the same round.", '');
    lines.push('| scenarios | target | server CPU × | Redis CPU × |');
    lines.push('|---|---|---|---|');
    for (const r of result.ratios) lines.push(`| ${r.scenarios} | ${r.target} | ${f2(r.cpu)} | ${r.redis === undefined ? '–' : f2(r.redis)} |`);
    lines.push('');
  }
  if (result.latency.length) {
    lines.push('## latency at half the saturated throughput (ghz -r)', '');
    lines.push('| scenario | target | rate req/s | p50 ms | p99 ms | errors |');
    lines.push('|---|---|---|---|---|---|');
    for (const l of result.latency) lines.push(`| ${l.scenario} | ${l.target} | ${l.rate} | ${f1(l.p50)} | ${f1(l.p99)} | ${l.errors} |`);
    lines.push('');
  }
  return lines.join('\n');
}

/** The leading table of a --reference run: floodgate and the reference, per scenario and backend. */
function sideBySide(result) {
  const lines = [
    `## floodgate vs envoyproxy/ratelimit (${result.reference.binary})`,
    '',
    'Each figure is floodgate / reference; "×" is the median over the rounds of floodgate ÷ reference in the same round (server CPU per call, Redis CPU per call = per decision of the same work). Latency: p99 at half the reference\'s saturated rate.',
    '',
    "| scenario | backend | req/s | p50 ms | p99 ms | server CPU µs/call | × | Redis CPU µs/call | × | p99 ms at half the reference's rate |",
    '|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const row of result.rows.filter((r) => r.referenceTarget !== undefined)) {
    const ref = result.rows.find((r) => r.scenario === row.scenario && r.target === row.referenceTarget);
    const lat = (target) => result.latency.find((l) => l.scenario === row.scenario && l.target === target);
    const [la, lb] = [lat(row.target), lat(row.referenceTarget)];
    const latency = la && lb ? `${f1(la.p99)} / ${f1(lb.p99)} at ${lb.rate}/s` : '–';
    lines.push(
      `| ${row.scenario} | ${row.target.split('/')[1]} | ${f0(row.rps)} / ${f0(ref.rps)} | ${f1(row.p50)} / ${f1(ref.p50)} | ${f1(row.p99)} / ${f1(ref.p99)} | ${f0(row.cpuUs)} / ${f0(ref.cpuUs)} | ${f2(row.cpuToReference)} | ${f1(row.redisUs)} / ${f1(ref.redisUs)} | ${f2(row.redisToReference)} | ${latency} |`,
    );
  }
  lines.push('');
  return lines;
}

/** BENCH_RATIOS: per target and pair, medians of same-round ratios of CPU per call. */
function scenarioRatios(samples, targets) {
  const out = [];
  for (const [a, b] of RATIOS) {
    for (const t of targets) {
      const pairs = [];
      for (const s of samples) {
        if (s.scenario !== a || s.target !== t.name) continue;
        const other = samples.find((o) => o.scenario === b && o.target === t.name && o.round === s.round);
        if (other) pairs.push([s, other]);
      }
      if (pairs.length === 0) continue;
      const redis = pairs.every(([x, y]) => x.redisUs !== undefined && y.redisUs !== undefined)
        ? median(pairs.map(([x, y]) => x.redisUs / y.redisUs))
        : undefined;
      out.push({ scenarios: `${a} ÷ ${b}`, target: t.name, cpu: median(pairs.map(([x, y]) => x.cpuUs / y.cpuUs)), redis });
    }
  }
  return out;
}

// --- main -----------------------------------------------------------------------------------

/** BENCH_FRESH: `t` becomes a new server process of the same kind, warmed up on `scenario`. */
async function restart(bin, t, scenario) {
  const exited = new Promise((resolve) => t.child.once('exit', resolve));
  t.child.kill('SIGKILL');
  await exited;
  const fresh = await t.start();
  Object.assign(t, { port: fresh.port, pid: fresh.pid, child: fresh.child });
  ghz(bin, t, scenario, WARMUP);
}

async function main() {
  const argv = process.argv.slice(2);
  const compareAt = argv.indexOf('--compare');
  const sidesSpec =
    compareAt >= 0
      ? [
          ['before', argv[compareAt + 1]],
          ['after', undefined],
        ]
      : [['current', undefined]];
  if (compareAt >= 0 && !argv[compareAt + 1]) throw new Error('--compare needs a git ref');
  const referenceAt = argv.indexOf('--reference');
  const reference = referenceAt >= 0 ? argv[referenceAt + 1] : undefined;
  if (referenceAt >= 0 && (!reference || !existsSync(reference))) throw new Error(`--reference needs the ratelimit binary (got ${reference})`);
  // --render <json>: the markdown of a rate run again, from its JSON (after a change to the tables).
  const render = flagValue(argv, '--render');
  if (render !== undefined) {
    writeFileSync(render.replace(/\.json$/, '.md'), `${rateMarkdown(JSON.parse(readFileSync(render, 'utf8')))}\n`);
    return;
  }
  const bin = ghzBinary();
  if (argv.includes('--rate')) return rateMain(argv, bin, reference);
  const sides = sidesSpec.map(([name, ref]) => buildSide(name, ref));
  const loadStart = loadavg();

  const redisByBackend = {};
  if (BACKENDS.includes('redis')) redisByBackend.redis = await startStandaloneRedis();
  if (BACKENDS.includes('cluster')) redisByBackend.cluster = await startClusterRedis();
  const bare = await startBare();
  const targets = [bare];
  for (const backend of BACKENDS) {
    for (const side of sides) targets.push(await startFloodgate(side, backend, redisByBackend[backend]));
    // The reference has no in-process backend: it runs on the Redis backends only.
    if (reference !== undefined && backend !== 'memory') targets.push(await startReference(reference, backend, redisByBackend[backend]));
  }
  log(`targets: ${targets.map((t) => `${t.name} :${t.port}`).join(', ')}`);

  for (const scenario of SCENARIOS) for (const t of targets) ghz(bin, t, scenario, WARMUP);

  const samples = []; // { round, scenario, target, ...figures }
  for (let round = 1; round <= ROUNDS; round++) {
    for (const scenario of SCENARIOS) {
      // Rotate the order each round so a slow drift of the machine does not favour one target.
      const order = targets.map((_, i) => targets[(i + round - 1) % targets.length]);
      for (const t of order) {
        if (FRESH) await restart(bin, t, scenario);
        const s = ghz(bin, t, scenario, DURATION, RATE);
        samples.push({ round, scenario, target: t.name, ...s });
        log(
          `round ${round} ${scenario} ${t.name}: ${f0(s.rps)} req/s, p50 ${f1(s.p50)} ms, p99 ${f1(s.p99)} ms, ${f0(s.cpuUs)} µs CPU/call${s.redisUs !== undefined ? `, Redis ${f1(s.redisUs)} µs/call, ${f2(s.redisCommandsPerCall)} commands (${f2(s.redisScriptsPerCall)} scripts)/call` : ''}${s.errors ? `, ${s.errors} errors` : ''}`,
        );
      }
    }
  }

  const rows = [];
  for (const scenario of SCENARIOS) {
    for (const t of targets) {
      const mine = samples.filter((s) => s.scenario === scenario && s.target === t.name);
      const sameRound = (s, target) => samples.find((b) => b.scenario === scenario && b.round === s.round && b.target === target);
      const ratios = mine.map((s) => s.cpuUs / sameRound(s, 'bare').cpuUs);
      const beforeTarget = t.side === 'after' ? `before/${t.backend}` : undefined;
      const referenceTarget =
        reference !== undefined && (t.side === 'after' || t.side === 'current') && t.backend !== 'memory' ? `reference/${t.backend}` : undefined;
      const toReference = (figure) => median(mine.map((s) => s[figure] / sameRound(s, referenceTarget)[figure]));
      rows.push({
        scenario,
        target: t.name,
        rps: median(mine.map((s) => s.rps)),
        p50: median(mine.map((s) => s.p50)),
        p99: median(mine.map((s) => s.p99)),
        cpuUs: median(mine.map((s) => s.cpuUs)),
        ratio: median(ratios),
        ...(beforeTarget ? { ratioToBefore: median(mine.map((s) => s.cpuUs / sameRound(s, beforeTarget).cpuUs)) } : {}),
        ...(referenceTarget ? { referenceTarget, cpuToReference: toReference('cpuUs'), redisToReference: toReference('redisUs') } : {}),
        redisUs: median(mine.map((s) => s.redisUs)),
        redisCommandsPerCall: median(mine.map((s) => s.redisCommandsPerCall)),
        redisScriptsPerCall: median(mine.map((s) => s.redisScriptsPerCall)),
        errors: mine.reduce((n, s) => n + s.errors, 0),
      });
    }
  }

  const latency = [];
  if (LATENCY) {
    for (const scenario of SCENARIOS) {
      for (const t of targets) {
        // Side by side, both servers get half the reference's saturated rate on that backend.
        const base = rows.find(
          (r) =>
            r.scenario === scenario &&
            r.target === (reference !== undefined && t.backend !== 'memory' && t.side !== 'bare' ? `reference/${t.backend}` : t.name),
        );
        const rate = Math.max(1, Math.floor(base.rps / 2));
        const s = ghz(bin, t, scenario, DURATION, rate);
        latency.push({ scenario, target: t.name, rate, p50: s.p50, p99: s.p99, errors: s.errors });
        log(`latency ${scenario} ${t.name} at ${rate} req/s: p50 ${f1(s.p50)} ms, p99 ${f1(s.p99)} ms${s.errors ? `, ${s.errors} errors` : ''}`);
      }
    }
  }

  const date = new Date()
    .toISOString()
    .replace(/:\d\d\.\d+Z$/, 'Z')
    .replace(':', '');
  const result = {
    date,
    machine: {
      nproc: cpus().length,
      cpu: cpus()[0]?.model ?? '?',
      node: process.version,
      redis: spawnSync('redis-server', ['--version']).stdout.toString().split(' ').slice(0, 3).join(' '),
      loadStart,
      loadEnd: loadavg(),
    },
    settings: {
      quick: QUICK,
      duration: DURATION,
      rounds: ROUNDS,
      warmup: WARMUP,
      concurrency: CONCURRENCY,
      connections: CONNECTIONS,
      backends: BACKENDS,
      scenarios: SCENARIOS,
      env: EXTRA_ENV,
      fresh: FRESH,
      rate: RATE,
    },
    sides: sides.map(({ name, ref, commit }) => ({ name, ref, commit })),
    reference: reference === undefined ? undefined : { binary: reference, env: EXTRA_REFERENCE_ENV },
    rows,
    ratios: scenarioRatios(samples, targets),
    latency,
    samples,
  };
  const dir = join(ROOT, 'bench', 'results');
  mkdirSync(dir, { recursive: true });
  const md = markdown(result);
  writeFileSync(join(dir, `${date}.json`), `${JSON.stringify(result, null, 2)}\n`);
  writeFileSync(join(dir, `${date}.md`), `${md}\n`);
  process.stdout.write(`${md}\nwritten: bench/results/${date}.md and .json\n`);
  for (const t of targets) t.child.kill('SIGTERM');
  await sleep(300);
}

// --- the rate mode (issue 29): --rate 50%,80% ---------------------------------------------------
//
//   npm run bench -- --reference <binary> --rate 50%,80% [--quick] [--backends redis,cluster]
//     [--scenarios uniform,multi3,hot] [--duration 10] [--rounds 2] [--saturate 5]
//
// First each server is saturated (--saturate s, 2 rounds; 1 with --quick) to find the
// reference's rate (floodgate's own without --reference), then every share of it is offered to
// both at a fixed rate (ghz -r), rounds alternating and the order rotated each round. Per cell
// and server: req/s, p50, p99, p99.9 and the share of calls over 20 ms (from every call's
// latency), server and Redis CPU per call (/proc), RSS at start and after each round. For
// floodgate, its /metrics before and after each round: the event loop's delay, GC pauses by
// kind, and the handler's own share over 20 ms (bench-stats.mjs runtimeDelta).
// BENCH_VARIANTS="name|node args|ENV=v ENV2=v;name2|...": more floodgate servers of the same
// build, with other node flags or settings, in the same rounds (e.g. a GC flag against none).

function flagValue(argv, name) {
  const i = argv.indexOf(name);
  if (i < 0) return undefined;
  const v = argv[i + 1];
  if (v === undefined || v.startsWith('--')) throw new Error(`${name} needs a value`);
  return v;
}

/** Resident set of `pid` and its descendants, in MB (VmRSS from /proc). */
function treeRssMb(pid) {
  const pids = [pid];
  for (const name of readdirSync('/proc')) {
    if (/^\d+$/.test(name) && procStat(name)?.ppid === pid) pids.push(Number(name));
  }
  let kb = 0;
  for (const p of pids) {
    try {
      kb += Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${p}/status`, 'utf8'))?.[1] ?? 0);
    } catch {
      // gone
    }
  }
  return kb / 1024;
}

/** One scrape on a fresh connection (the debug listener closes idle ones: no keep-alive to trust). */
function scrapeMetrics(url) {
  return new Promise((resolve) => {
    const req = httpGet(url, { agent: false, timeout: 5000 }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve(res.statusCode === 200 ? parseScrape(text) : (log(`scrape ${url}: ${res.statusCode}`), undefined)));
      res.on('error', () => resolve(undefined));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (err) => {
      log(`scrape ${url}: ${err.message}`);
      resolve(undefined);
    });
  });
}

function parseVariants(spec) {
  return (spec ?? '')
    .split(';')
    .filter((v) => v.trim())
    .map((v) => {
      const [name, nodeArgs = '', env = ''] = v.split('|');
      return {
        name: name.trim(),
        nodeArgs: nodeArgs.split(/\s+/).filter(Boolean),
        env: Object.fromEntries(
          env
            .split(/\s+/)
            .filter(Boolean)
            .map((kv) => kv.split(/=(.*)/s).slice(0, 2)),
        ),
      };
    });
}

const sumBy = (xs, f) => xs.reduce((s, x) => s + (f(x) ?? 0), 0);
const pctOf = (x) => (x === undefined ? '–' : `${(x * 100).toFixed(2)} %`);

async function rateMain(argv, bin, reference) {
  const quick = argv.includes('--quick') || QUICK;
  const rates = parseRates(flagValue(argv, '--rate'));
  const backends = (flagValue(argv, '--backends') ?? process.env.BENCH_BACKENDS ?? 'redis,cluster').split(',').filter(Boolean);
  const scenarios = (flagValue(argv, '--scenarios') ?? process.env.BENCH_SCENARIOS ?? 'uniform,multi3,hot').split(',').filter(Boolean);
  const duration = Number(flagValue(argv, '--duration') ?? (quick ? 3 : 10));
  const rounds = Number(flagValue(argv, '--rounds') ?? (quick ? 1 : 2));
  const satDuration = Number(flagValue(argv, '--saturate') ?? (quick ? 2 : 5));
  const satRounds = quick ? 1 : 2;
  if (reference !== undefined && backends.includes('memory')) throw new Error('the reference has no memory backend: --backends redis,cluster');
  const variants = [{ name: 'floodgate', nodeArgs: [], env: {} }, ...parseVariants(process.env.BENCH_VARIANTS)];
  const side = buildSide('current', undefined);
  const loadStart = loadavg();
  log(`load average at start: ${loadStart.map(f2).join(' ')}`);

  const targets = [];
  for (const backend of backends) {
    const redis = backend === 'redis' ? await startStandaloneRedis() : backend === 'cluster' ? await startClusterRedis() : undefined;
    for (const v of variants) targets.push(await startFloodgate(side, backend, redis, v));
    if (reference !== undefined) targets.push(await startReference(reference, backend, redis));
  }
  await sleep(2000);
  const idleRss = Object.fromEntries(targets.map((t) => [t.name, treeRssMb(t.pid)]));
  log(`targets: ${targets.map((t) => `${t.name} :${t.port} (${f0(idleRss[t.name])} MB idle)`).join(', ')}`);
  const cell = (backend) => targets.filter((t) => t.backend === backend);
  const rotate = (xs, k) => xs.map((_, i) => xs[(i + k) % xs.length]);

  for (const backend of backends) for (const scenario of scenarios) for (const t of cell(backend)) ghz(bin, t, scenario, WARMUP);

  const saturated = [];
  for (let round = 1; round <= satRounds; round++) {
    for (const backend of backends) {
      for (const scenario of scenarios) {
        for (const t of rotate(cell(backend), round - 1)) {
          const s = ghz(bin, t, scenario, satDuration);
          saturated.push({ round, backend, scenario, target: t.name, ...s, rssMb: treeRssMb(t.pid), load: loadavg()[0] });
          log(
            `saturated ${round} ${scenario} ${t.name}: ${f0(s.rps)} req/s, p99 ${f1(s.p99)} ms, p99.9 ${f1(s.p999)} ms, ${f0(s.cpuUs)} µs/call`,
          );
        }
      }
    }
  }
  const baseTarget = (backend) => (reference !== undefined ? `reference/${backend}` : `floodgate/${backend}`);
  const baseRate = (backend, scenario) =>
    median(saturated.filter((s) => s.backend === backend && s.scenario === scenario && s.target === baseTarget(backend)).map((s) => s.rps));

  const fixed = [];
  for (let round = 1; round <= rounds; round++) {
    for (const backend of backends) {
      for (const scenario of scenarios) {
        for (const rate of rates) {
          const rps = Math.max(1, Math.round(rate.rps ?? rate.share * baseRate(backend, scenario)));
          for (const t of rotate(cell(backend), round - 1)) {
            const before = t.metricsUrl ? await scrapeMetrics(t.metricsUrl) : undefined;
            const s = ghz(bin, t, scenario, duration, rps);
            const after = t.metricsUrl ? await scrapeMetrics(t.metricsUrl) : undefined;
            const runtime = before && after ? runtimeDelta(before, after) : undefined;
            const rss = treeRssMb(t.pid);
            fixed.push({
              round,
              backend,
              scenario,
              rate: rate.label,
              offered: rps,
              target: t.name,
              ...s,
              rssMb: rss,
              runtime,
              load: loadavg()[0],
            });
            log(
              `${rate.label} (${rps}/s) ${round} ${scenario} ${t.name}: p50 ${f1(s.p50)} p99 ${f1(s.p99)} p99.9 ${f1(s.p999)} ms, over ${ENVOY_TIMEOUT_MS} ms ${pctOf(s.overShare)}, ${f0(s.cpuUs)} µs/call, RSS ${f0(rss)} MB` +
                (runtime
                  ? `; loop >20 ms ${runtime.loopOver20ms}/${runtime.loopSamples}, minor GC ${runtime.gc.minor.count} (${f0(runtime.gc.minor.totalMs)} ms), major ${runtime.gc.major.count}, handler >20 ms ${pctOf(runtime.handlerOverShare)}`
                  : ''),
            );
          }
        }
      }
    }
  }

  const rows = [];
  for (const backend of backends) {
    for (const scenario of scenarios) {
      for (const t of cell(backend)) {
        const sat = saturated.filter((s) => s.backend === backend && s.scenario === scenario && s.target === t.name);
        rows.push({ kind: 'saturated', backend, scenario, rate: 'saturated', target: t.name, ...summarize(sat) });
        for (const rate of rates) {
          const mine = fixed.filter((s) => s.backend === backend && s.scenario === scenario && s.rate === rate.label && s.target === t.name);
          rows.push({ kind: 'fixed', backend, scenario, rate: rate.label, offered: mine[0]?.offered, target: t.name, ...summarize(mine) });
        }
      }
    }
  }
  const date = new Date()
    .toISOString()
    .replace(/:\d\d\.\d+Z$/, 'Z')
    .replace(':', '');
  const result = {
    date,
    mode: 'rate',
    machine: {
      nproc: cpus().length,
      cpu: cpus()[0]?.model ?? '?',
      node: process.version,
      redis: spawnSync('redis-server', ['--version']).stdout.toString().split(' ').slice(0, 3).join(' '),
      loadStart,
      loadEnd: loadavg(),
    },
    settings: {
      quick,
      rates: rates.map((r) => r.label),
      backends,
      scenarios,
      duration,
      rounds,
      saturate: { duration: satDuration, rounds: satRounds },
      warmup: WARMUP,
      concurrency: CONCURRENCY,
      connections: CONNECTIONS,
      env: EXTRA_ENV,
      nodeArgs: process.env.BENCH_NODE_ARGS ?? '',
      variants,
      skipFirstMs: 500,
    },
    floodgate: { commit: side.commit },
    reference: reference === undefined ? undefined : { binary: reference, env: EXTRA_REFERENCE_ENV },
    idleRssMb: idleRss,
    rows,
    samples: { saturated, fixed },
  };
  const dir = join(ROOT, 'bench', 'results');
  mkdirSync(dir, { recursive: true });
  const md = rateMarkdown(result);
  writeFileSync(join(dir, `${date}-rate.json`), `${JSON.stringify(result, null, 2)}\n`);
  writeFileSync(join(dir, `${date}-rate.md`), `${md}\n`);
  process.stdout.write(`${md}\nwritten: bench/results/${date}-rate.md and .json\n`);
  for (const t of targets) t.child.kill('SIGTERM');
  await sleep(300);
}

/** Medians over rounds; the share over 20 ms pooled over every call of the rounds. */
function summarize(samples) {
  const calls = sumBy(samples, (s) => s.calls);
  const over = sumBy(samples, (s) => (s.overShare ?? 0) * s.calls);
  const rt = samples.map((s) => s.runtime).filter(Boolean);
  const gcKind = (kind) =>
    rt.length
      ? {
          count: sumBy(rt, (r) => r.gc[kind].count),
          totalMs: sumBy(rt, (r) => r.gc[kind].totalMs),
          over5ms: sumBy(rt, (r) => r.gc[kind].over5ms),
        }
      : undefined;
  const handled = sumBy(rt, (r) => r.handled);
  return {
    rounds: samples.length,
    calls,
    achieved: median(samples.map((s) => s.rps)),
    p50: median(samples.map((s) => s.p50)),
    p99: median(samples.map((s) => s.p99)),
    p999: median(samples.map((s) => s.p999)),
    overShare: calls ? over / calls : undefined,
    maxMs: Math.max(...samples.map((s) => s.maxMs ?? 0)),
    cpuUs: median(samples.map((s) => s.cpuUs)),
    redisUs: median(samples.map((s) => s.redisUs)),
    rssMb: median(samples.map((s) => s.rssMb)),
    load: median(samples.map((s) => s.load)),
    seconds: sumBy(samples, (s) => s.calls / s.rps),
    runtime: rt.length
      ? {
          loopSamples: sumBy(rt, (r) => r.loopSamples),
          loopOver20ms: sumBy(rt, (r) => r.loopOver20ms),
          loopOver5ms: sumBy(rt, (r) => r.loopOver5ms),
          loopDelayMs: sumBy(rt, (r) => r.loopDelayMs),
          gc: { minor: gcKind('minor'), major: gcKind('major'), incremental: gcKind('incremental'), weakcb: gcKind('weakcb') },
          newSpaceMb: median(rt.map((r) => r.newSpaceMb)),
          handlerOverShare: handled ? sumBy(rt, (r) => (r.handlerOverShare ?? 0) * r.handled) / handled : undefined,
        }
      : undefined,
  };
}

function rateMarkdown(result) {
  const m = result.machine;
  const st = result.settings;
  const lines = [
    `# floodgate at fixed rates ${result.date}`,
    '',
    `- machine: ${m.nproc} cores, ${m.cpu}, node ${m.node}, ${m.redis}, ghz ${GHZ_VERSION}; shared with other work, load average (1, 5, 15 min) at start ${m.loadStart.map(f2).join(' ')}, at end ${m.loadEnd.map(f2).join(' ')}`,
    `- floodgate ${result.floodgate.commit}${result.reference ? `; reference: ${result.reference.binary}` : ''}`,
    `- ghz -c ${st.concurrency} --connections ${st.connections}; saturated: ${st.saturate.rounds} round(s) of ${st.saturate.duration} s; fixed rates ${st.rates.join(', ')} of ${result.reference ? "the reference's" : "floodgate's"} saturated rate: ${st.rounds} round(s) of ${st.duration} s each; rounds alternate, order rotated each round; ${st.warmup} s warm-up per scenario; the first ${st.skipFirstMs} ms of each round (ghz connecting) left out of the latency figures`,
    `- floodgate settings: ${JSON.stringify(st.env)}, node args '${st.nodeArgs}'${
      st.variants.length > 1
        ? `; variants: ${st.variants
            .slice(1)
            .map((v) => `${v.name} = ${v.nodeArgs.join(' ')} ${JSON.stringify(v.env)}`)
            .join('; ')}`
        : ''
    }; LOCAL_CACHE_SIZE_IN_BYTES=1048576 for both`,
    `- idle RSS (2 s after start): ${Object.entries(result.idleRssMb)
      .map(([t, mb]) => `${t} ${f0(mb)} MB`)
      .join(', ')}`,
    '',
    `Latency figures are medians over the rounds of each round's figure, from every call's latency; "over ${ENVOY_TIMEOUT_MS} ms" is pooled over all calls of the rounds. CPU per call: user + system time over the round ÷ calls answered (server: its process tree; Redis: every redis-server of the backend). RSS: after the round.`,
    '',
  ];
  for (const backend of st.backends) {
    for (const scenario of st.scenarios) {
      lines.push(`## ${scenario}, ${backend === 'redis' ? 'standalone Redis' : backend === 'cluster' ? '3-master Redis cluster' : backend}`, '');
      lines.push(
        `| rate | server | req/s | p50 ms | p99 ms | p99.9 ms | over ${ENVOY_TIMEOUT_MS} ms | server CPU µs/call | Redis CPU µs/call | RSS MB |`,
      );
      lines.push('|---|---|---|---|---|---|---|---|---|---|');
      for (const r of result.rows.filter((x) => x.backend === backend && x.scenario === scenario)) {
        lines.push(
          `| ${r.rate}${r.offered ? ` (${r.offered}/s)` : ''} | ${r.target.split('/')[0]} | ${f0(r.achieved)} | ${f2(r.p50)} | ${f1(r.p99)} | ${f1(r.p999)} | ${pctOf(r.overShare)} | ${f0(r.cpuUs)} | ${f1(r.redisUs)} | ${f0(r.rssMb)} |`,
        );
      }
      lines.push('');
      const attributed = result.rows.filter((x) => x.backend === backend && x.scenario === scenario && x.runtime && x.kind === 'fixed');
      if (attributed.length) {
        lines.push(
          `Inside floodgate, summed over the rounds (${'`'}/metrics${'`'} before and after each): event-loop samples (one per 10 ms of loop time) late by more than 20 ms and 5 ms; GC pauses by kind (count, total ms, count over 5 ms); calls answered per scavenge and the young generation's size after the round (how much a call leaves for the scavenger); the share of calls over 20 ms in the handler itself (decode to answer) against the client's.`,
          '',
        );
        lines.push(
          '| rate | server | loop late > 20 ms | loop late > 5 ms | loop delay ms/s | minor GC n / ms / >5 ms | calls per minor GC | new space MB | major GC n / ms | incremental n / ms | handler over 20 ms | client over 20 ms |',
        );
        lines.push('|---|---|---|---|---|---|---|---|---|---|---|---|');
        for (const r of attributed) {
          const x = r.runtime;
          lines.push(
            `| ${r.rate} | ${r.target.split('/')[0]} | ${x.loopOver20ms} of ${x.loopSamples} | ${x.loopOver5ms} | ${f1(x.loopDelayMs / r.seconds)} | ${x.gc.minor.count} / ${f0(x.gc.minor.totalMs)} / ${x.gc.minor.over5ms} | ${x.gc.minor.count ? f0(r.calls / x.gc.minor.count) : '–'} | ${f1(x.newSpaceMb)} | ${x.gc.major.count} / ${f0(x.gc.major.totalMs)} | ${x.gc.incremental.count} / ${f0(x.gc.incremental.totalMs)} | ${pctOf(x.handlerOverShare)} | ${pctOf(r.overShare)} |`,
          );
        }
        lines.push('');
      }
    }
  }
  if (result.reference) lines.push(...targetsTable(result));
  return lines.join('\n');
}

/** Issue 29's targets, cell by cell: floodgate ÷ reference. */
function targetsTable(result) {
  const lines = [
    "## Against issue 29's targets",
    '',
    "floodgate ÷ reference per cell (p99 target: ≤ 1.0× at 50 %, ≤ 1.2× at 80 %; p99.9 ≤ 1.5×; over 20 ms at 50 %: ≤ 0.1 % or ≤ the reference's; saturated req/s ≥ 1.0×).",
    '',
    '| scenario | backend | rate | server | p99 × | p99.9 × | over 20 ms, server / reference | req/s × |',
    '|---|---|---|---|---|---|---|---|',
  ];
  for (const r of result.rows.filter((x) => !x.target.startsWith('reference/'))) {
    const ref = result.rows.find(
      (x) => x.backend === r.backend && x.scenario === r.scenario && x.rate === r.rate && x.target === `reference/${r.backend}`,
    );
    if (!ref) continue;
    const ratio = (a, b) => (a === undefined || !b ? '–' : f2(a / b));
    lines.push(
      `| ${r.scenario} | ${r.backend} | ${r.rate} | ${r.target.split('/')[0]} | ${ratio(r.p99, ref.p99)} | ${ratio(r.p999, ref.p999)} | ${pctOf(r.overShare)} / ${pctOf(ref.overShare)} | ${r.kind === 'saturated' ? ratio(r.achieved, ref.achieved) : '–'} |`,
    );
  }
  lines.push('');
  return lines;
}

main().then(
  () => process.exit(0),
  (err) => {
    log(`bench: ${err.stack ?? err}`);
    process.exit(1);
  },
);
