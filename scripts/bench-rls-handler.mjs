#!/usr/bin/env node
// GRPC_RLS_HANDLER=http2 against grpc-js (issue 29): two floodgate processes of the built tree
// (dist/), memory backend, ghz at a fixed rate on each in turn, rounds alternating. Per round and
// target: p50, p99, p99.9, the share of calls over 20 ms (Envoy's recommended timeout), from every
// call's latency (ghz -O json details), and server CPU per call (/proc).
//
//   npm run build && node scripts/bench-rls-handler.mjs
//
// Settings (environment): BENCH_RATE (5000), BENCH_DURATION (s, 15), BENCH_ROUNDS (3),
// BENCH_CONCURRENCY (50), BENCH_CONNECTIONS (4), BENCH_NODE_ARGS ("--max-semi-space-size=16").
import { spawn, spawnSync, execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, createConnection } from 'node:net';
import { loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout } from 'node:timers';

const ROOT = resolve(import.meta.dirname, '..');
const RATE = Number(process.env.BENCH_RATE ?? 5000);
const DURATION = Number(process.env.BENCH_DURATION ?? 15);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 50);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 4);
const NODE_ARGS = (process.env.BENCH_NODE_ARGS ?? '--max-semi-space-size=16').split(/\s+/).filter(Boolean);
const GHZ = process.env.GHZ ?? '/root/go/bin/ghz';
const CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim());
const REQUEST = {
  domain: 'bench',
  descriptors: [
    {
      entries: [
        { key: 'tenant', value: 't{{randomInt 0 10000}}' },
        { key: 'path', value: '/a' },
      ],
    },
  ],
};

function freePort() {
  return new Promise((res) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => res(port));
    });
  });
}

async function waitForPort(port) {
  for (let i = 0; i < 200; i++) {
    const up = await new Promise((res) => {
      const c = createConnection(port, '127.0.0.1');
      c.once('connect', () => (c.destroy(), res(true)));
      c.once('error', () => res(false));
    });
    if (up) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`port ${port} never opened`);
}

function cpuSeconds(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLK_TCK;
}

async function start(handler) {
  const port = await freePort();
  const child = spawn(process.execPath, [...NODE_ARGS, join(ROOT, 'dist', 'src', 'main.js')], {
    env: {
      ...process.env,
      BACKEND_TYPE: 'memory',
      RUNTIME_ROOT: join(ROOT, 'bench', 'rules'),
      RUNTIME_WATCH_ROOT: 'false',
      LOG_LEVEL: 'ERROR',
      GRPC_HOST: '127.0.0.1',
      GRPC_PORT: String(port),
      HOST: '127.0.0.1',
      PORT: '0',
      DEBUG_PORT: '0',
      USE_PROMETHEUS: 'false',
      USE_STATSD: 'false',
      GRPC_RLS_HANDLER: handler,
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  await waitForPort(port);
  return { handler, port, pid: child.pid, child };
}

function ghz(target, seconds) {
  const args = [
    '--insecure',
    '--proto',
    'proto/envoy/service/ratelimit/v3/rls.proto',
    '--import-paths',
    'proto',
    '--call',
    'envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit',
    '-d',
    JSON.stringify(REQUEST),
    '-c',
    String(CONCURRENCY),
    '--connections',
    String(CONNECTIONS),
    '-r',
    String(RATE),
    '-z',
    `${seconds}s`,
    '-O',
    'json',
    `127.0.0.1:${target.port}`,
  ];
  const cpu0 = cpuSeconds(target.pid);
  const out = spawnSync(GHZ, args, { cwd: ROOT, timeout: (seconds + 60) * 1000, maxBuffer: 512 * 1024 * 1024 });
  const cpu1 = cpuSeconds(target.pid);
  const report = JSON.parse(out.stdout.toString());
  const ok = (report.details ?? []).filter((d) => d.status === 'OK').map((d) => d.latency / 1e6);
  ok.sort((a, b) => a - b);
  const at = (q) => ok[Math.min(ok.length - 1, Math.floor(q * ok.length))];
  return {
    calls: ok.length,
    rps: report.rps,
    p50: at(0.5),
    p99: at(0.99),
    p999: at(0.999),
    over20: ok.filter((ms) => ms > 20).length / ok.length,
    cpuUs: ((cpu1 - cpu0) * 1e6) / ok.length,
    load: loadavg()[0],
  };
}

const targets = [await start('http2'), await start('grpc-js')];
const rows = [];
try {
  for (const t of targets) ghz(t, 3);
  for (let round = 1; round <= ROUNDS; round++) {
    // Alternate which goes first.
    const order = round % 2 ? targets : [...targets].reverse();
    for (const t of order) {
      const r = ghz(t, DURATION);
      rows.push({ round, handler: t.handler, ...r });
      console.log(
        `round ${round} ${t.handler.padEnd(7)} ${r.calls} calls ${r.rps.toFixed(0)}/s p50 ${r.p50.toFixed(2)} p99 ${r.p99.toFixed(2)} p99.9 ${r.p999.toFixed(2)} ms, over 20 ms ${(100 * r.over20).toFixed(2)} %, CPU ${r.cpuUs.toFixed(0)} µs/call, load ${r.load.toFixed(1)}`,
      );
    }
  }
} finally {
  for (const t of targets) t.child.kill();
}
const median = (xs) => {
  const v = [...xs].sort((a, b) => a - b);
  const m = Math.floor(v.length / 2);
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
};
for (const handler of ['http2', 'grpc-js']) {
  const mine = rows.filter((r) => r.handler === handler);
  const m = (k) => median(mine.map((r) => r[k]));
  console.log(
    `median ${handler.padEnd(7)} p50 ${m('p50').toFixed(2)} p99 ${m('p99').toFixed(2)} p99.9 ${m('p999').toFixed(2)} ms, over 20 ms ${(100 * m('over20')).toFixed(2)} %, CPU ${m('cpuUs').toFixed(0)} µs/call`,
  );
}
