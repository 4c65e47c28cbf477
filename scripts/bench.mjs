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
import { tmpdir, cpus, loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout } from 'node:timers';

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

async function startFloodgate(side, backend, redis) {
  const port = await freePort();
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
    DEBUG_PORT: '0',
    USE_PROMETHEUS: 'false',
    // Only the hot scenario's counter is ever over its limit, so the cache is idle elsewhere.
    LOCAL_CACHE_SIZE_IN_BYTES: '1048576',
    ...EXTRA_ENV,
  };
  const child = spawn(
    process.execPath,
    [...(process.env.BENCH_NODE_ARGS ?? '').split(/\s+/).filter(Boolean), join(side.dir, 'dist', 'src', 'main.js')],
    {
      env,
      stdio: ['ignore', 'ignore', 'inherit'],
      cwd: side.dir,
    },
  );
  children.push(child);
  await waitForPort(port);
  return {
    name: `${side.name}/${backend}`,
    side: side.name,
    backend,
    port,
    pid: child.pid,
    redisPids: redis?.pids ?? [],
    redisPorts: redis?.ports ?? [],
    child,
    start: () => startFloodgate(side, backend, redis),
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
  const out = spawnSync(bin, args, { cwd: ROOT, timeout: GHZ_TIMEOUT_MS, maxBuffer: 64 * 1024 * 1024 });
  const cpu1 = treeCpu(target.pid);
  const redis1 = sumCpu(target.redisPids);
  const commands1 = redisCommands(target.redisPorts);
  if (out.status !== 0 && !out.stdout.length) throw new Error(`ghz failed on ${target.name}: ${out.stderr.toString()}`);
  const report = JSON.parse(out.stdout.toString());
  const pct = (p) => (report.latencyDistribution ?? []).find((d) => d.percentage === p)?.latency / 1e6;
  // ghz -z cuts the calls in flight when time is up: those are not server errors.
  const errors = Object.entries(report.errorDistribution ?? {})
    .filter(([msg]) => !/transport is closing|client connection is closing|context canceled/.test(msg))
    .reduce((s, [, n]) => s + n, 0);
  const ok = report.statusCodeDistribution?.OK ?? report.count;
  return {
    rps: report.rps,
    p50: pct(50),
    p99: pct(99),
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
  const bin = ghzBinary();
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

main().then(
  () => process.exit(0),
  (err) => {
    log(`bench: ${err.stack ?? err}`);
    process.exit(1);
  },
);
