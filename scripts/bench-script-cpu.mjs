#!/usr/bin/env node
// Redis CPU per decision of lua/fixed_window.lua, measured directly: no floodgate server, no
// ghz, so the figure is Redis' own work (INFO cpu: used_cpu_user + used_cpu_sys), which a busy
// machine disturbs far less than a server's CPU time. See bench/RESULTS.md.
//
//   node scripts/bench-script-cpu.mjs [--compare <git ref>]
//
// Each call carries BENCH_BATCH requests (8) of BENCH_KEYS counters each (1 and 3: uniform and
// multi3; windows 60 s, 1 s, 60 s as in bench/rules) over 10,000 ids, as the call coalescer
// merges concurrent requests into one EVALSHA. Rounds (BENCH_ROUNDS, 5) alternate between the
// working tree's script, <git ref>'s, and the reference's commands for the same work (one
// INCRBY and one EXPIRE per counter, one pipeline per request, all of a call's requests written
// together). Prints µs of Redis CPU per request, the median over the rounds.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout } from 'node:timers';
import Redis from 'ioredis';

const ROOT = resolve(import.meta.dirname, '..');
const BATCH = Number(process.env.BENCH_BATCH ?? 8);
const CALLS = Number(process.env.BENCH_CALLS ?? 1500);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const KEY_COUNTS = (process.env.BENCH_KEYS ?? '1,3').split(',').map(Number);
const IDS = 10_000;
const WINDOWS = [60, 1, 60];

/** lua/<name> at `ref` (undefined: the working tree), `-- @include lib/x.lua` lines expanded. */
function script(ref) {
  const read = (path) =>
    ref === undefined ? readFileSync(join(ROOT, path), 'utf8') : execFileSync('git', ['show', `${ref}:${path}`], { cwd: ROOT }).toString();
  return read('lua/fixed_window.lua').replace(/^-- @include (lib\/[a-z_]+\.lua)\s*$/gm, (_, lib) => read(`lua/${lib}`).replace(/\n+$/, ''));
}

const freePort = () =>
  new Promise((res) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => res(port));
    });
  });

async function redisCpu(client) {
  const info = await client.info('cpu');
  return Number(/used_cpu_user:([\d.]+)/.exec(info)[1]) + Number(/used_cpu_sys:([\d.]+)/.exec(info)[1]);
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function main() {
  const argv = process.argv.slice(2);
  const compareAt = argv.indexOf('--compare');
  const before = compareAt >= 0 ? argv[compareAt + 1] : undefined;
  const dir = mkdtempSync(join(tmpdir(), 'floodgate-script-cpu-'));
  const port = await freePort();
  const server = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir], {
    stdio: 'ignore',
  });
  const client = new Redis({ port, host: '127.0.0.1', lazyConnect: true, retryStrategy: () => null });
  client.on('error', () => {}); // refused connections while the server starts: retried below
  try {
    // Until the server listens (at most 10 s).
    for (let tries = 0; ; tries++) {
      try {
        await client.connect();
        break;
      } catch (err) {
        if (tries >= 100) throw err;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    const variants = [['after (working tree)', script(undefined)]];
    if (before !== undefined) variants.unshift([`before (${before})`, script(before)]);
    const shas = [];
    for (const [, lua] of variants) shas.push(await client.script('LOAD', lua));
    // ARGV per counter: hits, limit, window (the fixed window's own protocol since the
    // per-window keys of issue 20), or lib/read_call.lua's four with a burst before that.
    const withBurst = variants.map(([, lua]) => !lua.includes('ARGV[3i-1 .. 3i+1]'));
    // ARGV[1]: the count mode, by name since lib/read_mode.lua, a number before it.
    const countMode = variants.map(([, lua]) => (lua.includes('local function read_mode') ? 'count' : 0));
    const lines = [
      `| keys per request | ${variants.map(([name]) => name).join(' | ')} | reference's commands |`,
      `|---|${'---|'.repeat(variants.length + 1)}`,
    ];
    for (const k of KEY_COUNTS) {
      const viaScript = (v) => async () => {
        for (let n = 0; n < CALLS; n++) {
          const keys = [];
          const args = [countMode[v]];
          for (let b = 0; b < BATCH; b++) {
            const id = Math.floor(Math.random() * IDS);
            for (let j = 0; j < k; j++) {
              // Each variant its own keys: their stored values need not agree.
              keys.push(`rl:{bench:d${j}=t${id}}:fixed_window:${WINDOWS[j]}:v${v}`);
              args.push(1, 1_000_000_000, WINDOWS[j]);
              if (withBurst[v]) args.push(0);
            }
          }
          await client.evalsha(shas[v], keys.length, ...keys, ...args);
        }
      };
      const reference = async () => {
        for (let n = 0; n < CALLS; n++) {
          const pipelines = [];
          for (let b = 0; b < BATCH; b++) {
            const id = Math.floor(Math.random() * IDS);
            const p = client.pipeline();
            for (let j = 0; j < k; j++) {
              const key = `bench_d${j}_t${id}_${Math.floor(Date.now() / 1000 / WINDOWS[j]) * WINDOWS[j]}`;
              p.incrby(key, 1);
              p.expire(key, WINDOWS[j]);
            }
            pipelines.push(p.exec());
          }
          await Promise.all(pipelines);
        }
      };
      const runs = [...variants.map((_, v) => viaScript(v)), reference];
      for (const run of runs) await run(); // warm-up: the keys exist, as in a steady load
      const samples = runs.map(() => []);
      for (let round = 0; round < ROUNDS; round++) {
        for (let i = 0; i < runs.length; i++) {
          const at = (i + round) % runs.length;
          const cpu0 = await redisCpu(client);
          await runs[at]();
          samples[at].push((((await redisCpu(client)) - cpu0) * 1e6) / (CALLS * BATCH));
        }
      }
      lines.push(`| ${k} | ${samples.map((s) => median(s).toFixed(2)).join(' | ')} |`);
    }
    process.stdout.write(
      `Redis CPU µs per request (median of ${ROUNDS} rounds; ${CALLS} calls of ${BATCH} requests each)\n\n${lines.join('\n')}\n`,
    );
  } finally {
    client.disconnect();
    server.kill();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`bench-script-cpu: ${err.stack ?? err}\n`);
    process.exit(1);
  },
);
