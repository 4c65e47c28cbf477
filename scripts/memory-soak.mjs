// A short memory soak (issue 26, finding 9): the built server on the memory backend with the
// image's Node flags (NODE_OPTIONS in deploy/Dockerfile) and default settings, ghz sending
// requests of two new descriptors each for SOAK_SECONDS (default 45) at SOAK_RATE req/s (default
// 10,000; the machine may answer fewer). Prints the server's idle RSS, its RSS every 5 s, and
// the peak (VmHWM), against 80 % of the shipped pod's memory limit. SOAK_NODE_FLAGS replaces the
// flags (e.g. the image's of before: SOAK_NODE_FLAGS=--max-semi-space-size=16).
//
//   npm run build && node scripts/memory-soak.mjs
import { spawn, spawnSync, execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { clearInterval, clearTimeout, setInterval, setTimeout } from 'node:timers';

const ROOT = join(import.meta.dirname, '..');
const SECONDS = Number(process.env.SOAK_SECONDS ?? 45);
const RATE = Number(process.env.SOAK_RATE ?? 10_000);
const GHZ_VERSION = 'v0.120.0';

const dockerfile = readFileSync(join(ROOT, 'deploy/Dockerfile'), 'utf8');
const flags =
  process.env.SOAK_NODE_FLAGS !== undefined
    ? process.env.SOAK_NODE_FLAGS.split(/\s+/).filter(Boolean)
    : (/NODE_OPTIONS="?([^"\\\n]+)"?/.exec(dockerfile)?.[1] ?? '').trim().split(/\s+/);
const deployment = readFileSync(join(ROOT, 'deploy/kubernetes/base/deployment.yaml'), 'utf8');
const limitMiB = Number(/limits:\s*\n(?:\s+\w+:.*\n)*?\s+memory:\s*(\d+)Mi/.exec(deployment)?.[1]);

function ghzBinary() {
  const onPath = spawnSync('sh', ['-c', 'command -v ghz']).stdout.toString().trim();
  if (onPath) return onPath;
  const bin = join(execFileSync('go', ['env', 'GOPATH']).toString().trim(), 'bin', 'ghz');
  if (!existsSync(bin)) execFileSync('go', ['install', `github.com/bojand/ghz/cmd/ghz@${GHZ_VERSION}`], { stdio: 'inherit' });
  return bin;
}

const mib = (pid, field) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]) / 1024;

const root = mkdtempSync(join(tmpdir(), 'floodgate-soak-'));
mkdirSync(join(root, 'config'));
writeFileSync(
  join(root, 'config', 'soak.yaml'),
  'domain: soak\ndescriptors:\n  - key: a\n    rate_limit: {unit: hour, requests_per_unit: 1000}\n  - key: b\n    rate_limit: {unit: minute, requests_per_unit: 100}\n',
);
const env = {
  PATH: process.env.PATH,
  RUNTIME_ROOT: root,
  RUNTIME_WATCH_ROOT: 'false',
  HOST: '127.0.0.1',
  PORT: '0',
  GRPC_HOST: '127.0.0.1',
  GRPC_PORT: '0',
  DEBUG_PORT: '0',
  USE_PROMETHEUS: 'false',
  USE_STATSD: 'false',
  LOG_LEVEL: 'ERROR',
};
const server = spawn(process.execPath, [...flags, join(ROOT, 'dist/src/main.js')], { env, stdio: ['ignore', 'ignore', 'pipe'] });
let err = '';
server.stderr.on('data', (c) => (err += c));
try {
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no start: ${err}`)), 20_000);
    server.stderr.on('data', () => {
      const m = /serving gRPC on [^ ]+:(\d+),/.exec(err);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
  });
  await new Promise((r) => setTimeout(r, 1000));
  const idle = mib(server.pid, 'VmRSS');
  console.log(`node ${flags.join(' ')}; idle RSS ${idle.toFixed(0)} MiB; pod limit ${limitMiB} Mi, 80 % = ${(0.8 * limitMiB).toFixed(0)} MiB`);
  const t0 = Date.now();
  const sampler = setInterval(
    () => console.log(`  ${((Date.now() - t0) / 1000).toFixed(0)} s: RSS ${mib(server.pid, 'VmRSS').toFixed(0)} MiB`),
    5000,
  );
  const data = {
    domain: 'soak',
    descriptors: [
      { entries: [{ key: 'a', value: 'a{{.RequestNumber}}-{{.TimestampUnixNano}}' }] },
      { entries: [{ key: 'b', value: 'b{{.RequestNumber}}-{{.TimestampUnixNano}}' }] },
    ],
  };
  const args = [
    '--insecure',
    '--proto',
    'proto/envoy/service/ratelimit/v3/rls.proto',
    '--import-paths',
    'proto',
    '--call',
    'envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit',
    '-d',
    JSON.stringify(data),
    '-c',
    '50',
    '--connections',
    '4',
    '-z',
    `${SECONDS}s`,
    '-r',
    String(RATE),
    '-O',
    'json',
    `127.0.0.1:${port}`,
  ];
  const ghz = spawn(ghzBinary(), args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  ghz.stdout.on('data', (c) => (out += c));
  await new Promise((r) => ghz.once('exit', r));
  clearInterval(sampler);
  const report = JSON.parse(out);
  console.log(
    `${report.count} calls in ${SECONDS} s (${report.rps.toFixed(0)} req/s, ${Object.values(report.errorDistribution ?? {}).reduce((a, b) => a + b, 0)} errors: the calls in flight that ghz -z cuts when time is up); ` +
      `RSS now ${mib(server.pid, 'VmRSS').toFixed(0)} MiB, peak ${mib(server.pid, 'VmHWM').toFixed(0)} MiB, idle ${idle.toFixed(0)} MiB`,
  );
} finally {
  server.kill('SIGKILL');
  rmSync(root, { recursive: true, force: true });
}
