// An ordinary client beside an attack: one ShouldRateLimit call every INTERVAL ms, each with its
// own deadline, from its own process (so the attacker's work in the runner cannot delay it).
// Prints one JSON line of figures when stdin closes, then exits.
//   node test/abuse/probe-client.js <host:port> <intervalMs> <deadlineMs>
'use strict';
const path = require('node:path');
const { performance } = require('node:perf_hooks');
const { setInterval, clearInterval } = require('node:timers');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const [addr, intervalText, deadlineText] = process.argv.slice(2);
const intervalMs = Number(intervalText);
const deadlineMs = Number(deadlineText);
const definition = protoLoader.loadSync('envoy/service/ratelimit/v3/rls.proto', {
  keepCase: true,
  longs: Number,
  enums: String,
  includeDirs: [path.join(__dirname, '..', '..', 'proto')],
});
const { RateLimitService } = grpc.loadPackageDefinition(definition).envoy.service.ratelimit.v3;
const client = new RateLimitService(addr, grpc.credentials.createInsecure());
const stats = { calls: 0, answered: 0, late: 0, failed: 0, worstMs: 0, controlStallMs: 0, errors: {} };
// This process does almost nothing, so its own event-loop delay is what the machine alone
// (CPU contention, timer resolution) costs any process: the control for the server's figure.
const { monitorEventLoopDelay } = require('node:perf_hooks');
const ownDelay = monitorEventLoopDelay({ resolution: 10 });
let inFlight = 0;
let stopping = false;
let ready = false;

function call() {
  if (stopping) return;
  const start = performance.now();
  stats.calls++;
  inFlight++;
  client.ShouldRateLimit(
    { domain: 'probe', descriptors: [{ entries: [{ key: 'k', value: 'v' }] }] },
    { deadline: Date.now() + deadlineMs },
    (err) => {
      inFlight--;
      const ms = performance.now() - start;
      stats.worstMs = Math.max(stats.worstMs, ms);
      if (err) {
        stats.failed++;
        const name = grpc.status[err.code] || String(err.code);
        stats.errors[name] = (stats.errors[name] || 0) + 1;
      } else if (ms > deadlineMs) stats.late++;
      else {
        stats.answered++;
        if (!ready) {
          ready = true;
          ownDelay.enable();
          process.stdout.write('ready\n');
        }
      }
      finishIfDone();
    },
  );
}

function finishIfDone() {
  if (!stopping || inFlight > 0) return;
  client.close();
  ownDelay.disable();
  stats.controlStallMs = ownDelay.max / 1e6;
  process.stdout.write(JSON.stringify(stats) + '\n', () => process.exit(0));
}

const timer = setInterval(call, intervalMs);
call();
process.stdin.on('data', () => {});
process.stdin.on('end', () => {
  stopping = true;
  clearInterval(timer);
  finishIfDone();
});
