// The attacks of issue 8, each bounded in count and time, loopback only. `short` is the size
// `npm test` runs (test/e2e/abuse-short.test.ts); `full` is `npm run abuse`.
import * as grpc from '@grpc/grpc-js';
import { randomBytes } from 'node:crypto';
import { rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { request, Agent } from 'node:http';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { projectRoot } from '../../src/base/paths';
import { parseInfo, respCommand } from '../harness/resp-client';
import type { Attack, AttackContext } from './abuse-harness';
import { partialCalls, rapidReset } from './http2-attacks';
import { healthProbes, slowloris } from '../helpers/slowloris';
import { GRPC_BOUNDS_ATTACKS } from './grpc-bounds-attacks';
import { StatsdSink } from './statsd-sink';
import { RULES_ATTACKS } from './rules-attacks';
import { XDS_ATTACKS } from './xds-attacks';

const METHOD = '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit';

// ---- a tiny protobuf encoder: the attacks need messages no well-behaved client would build ----

function varint(n: number): Buffer {
  const bytes: number[] = [];
  while (n > 0x7f) {
    bytes.push((n & 0x7f) | 0x80);
    n = Math.floor(n / 128);
  }
  bytes.push(n);
  return Buffer.from(bytes);
}

function bytesField(field: number, value: Buffer | string): Buffer {
  const body = typeof value === 'string' ? Buffer.from(value) : value;
  return Buffer.concat([varint((field << 3) | 2), varint(body.length), body]);
}

function varintField(field: number, value: number): Buffer {
  return Buffer.concat([varint(field << 3), varint(value)]);
}

export interface Descriptor {
  readonly entries: readonly (readonly [string, string])[];
  readonly override?: { readonly requestsPerUnit: number; readonly unit: number };
}

export function encodeRequest(domain: string, descriptors: readonly Descriptor[], hitsAddend = 0): Buffer {
  const parts: Buffer[] = [bytesField(1, domain)];
  for (const d of descriptors) {
    const inner: Buffer[] = d.entries.map(([k, v]) => bytesField(1, Buffer.concat([bytesField(1, k), bytesField(2, v)])));
    if (d.override) inner.push(bytesField(2, Buffer.concat([varintField(1, d.override.requestsPerUnit), varintField(2, d.override.unit)])));
    parts.push(bytesField(2, Buffer.concat(inner)));
  }
  if (hitsAddend > 0) parts.push(varintField(3, hitsAddend));
  return Buffer.concat(parts);
}

/** Sends raw bytes as a ShouldRateLimit call; resolves with the status name. */
export function rawCall(client: grpc.Client, body: Buffer, timeoutMs = 10_000): Promise<string> {
  return new Promise((resolve) => {
    client.makeUnaryRequest(
      METHOD,
      (b: Buffer) => b,
      (b: Buffer) => b,
      body,
      { deadline: Date.now() + timeoutMs },
      (err: grpc.ServiceError | null) => resolve(err ? (grpc.status[err.code] ?? String(err.code)) : 'OK'),
    );
  });
}

function grpcClient(ctx: AttackContext): grpc.Client {
  return new grpc.Client(ctx.grpcAddress, grpc.credentials.createInsecure(), { 'grpc.max_receive_message_length': -1 });
}

/** Runs `task(i)` for i < count with at most `concurrency` in flight. */
export async function pool(count: number, concurrency: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < count) await task(next++);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const agent = new Agent({ keepAlive: true, maxSockets: 16 });

function postJson(port: number, body: Buffer | string, timeoutMs = 10_000): Promise<string> {
  return new Promise((resolve) => {
    const req = request(
      { host: '127.0.0.1', port, path: '/json', method: 'POST', agent, timeout: timeoutMs, headers: { 'content-type': 'application/json' } },
      (res) => {
        res.resume();
        res.on('end', () => resolve(`http_${res.statusCode}`));
        res.on('error', () => resolve('response_error'));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    req.end(body);
  });
}

const pick = <T>(xs: readonly T[]): T => xs[Math.floor(Math.random() * xs.length)] as T;
const n = (ctx: AttackContext, short: number, full: number): number => (ctx.scale === 'short' ? short : full);

/** Waits until the metric `name` (no labels) differs from `from`; returns its value. */
async function metricChange(ctx: AttackContext, name: string, from: number, withinMs: number): Promise<number> {
  const until = Date.now() + withinMs;
  for (;;) {
    const value = metricValue(await ctx.scrape(), name);
    if (value !== from || Date.now() > until) return value;
    await sleep(200);
  }
}

export function metricValue(text: string, name: string): number {
  const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}

/**
 * The attacks on what lies behind the transport (metric labels, memory counters, wildcard
 * matching) send requests of up to 3.7 MiB, far over GRPC_MAX_RECEIVE_MESSAGE_BYTES (64 KiB by
 * default), which would refuse them before they reach anything. They run with the largest
 * allowed message size instead, so each bound is tested on its own, as an operator who raises
 * the transport limit relies on it.
 */
const LARGE_MESSAGES = { GRPC_MAX_RECEIVE_MESSAGE_BYTES: String(16 * 1024 * 1024) };

/** Throws when any answer is not `expected`: an attack refused at the door tests nothing behind it. */
function requireOnly(ctx: AttackContext, expected: string): void {
  const others = Object.entries(ctx.answers).filter(([name]) => name !== expected);
  if (others.length > 0) throw new Error(`answers other than ${expected}: ${others.map(([k, v]) => `${k}=${v}`).join(' ')}`);
}

// ---- the attacks ----

const emptyDescriptors: Attack = {
  name: 'grpc: 4 MiB of empty descriptors',
  // Refused with RESOURCE_EXHAUSTED before decoding (GRPC_MAX_RECEIVE_MESSAGE_BYTES, 64 KiB).
  async run(ctx) {
    const body = Buffer.concat([bytesField(1, 'abuse'), Buffer.alloc(4 * 1024 * 1024 - 16, Buffer.from([0x12, 0x00]))]);
    const client = grpcClient(ctx);
    for (let i = 0; i < n(ctx, 1, 3); i++) ctx.answer(await rawCall(client, body, 20_000));
    client.close();
  },
};

const unknownDomains: Attack = {
  name: 'metrics: unknown 4 KB domains (/json)',
  async run(ctx) {
    const pad = 'd'.repeat(4000);
    await pool(n(ctx, 500, 10_000), 16, async (i) => {
      ctx.answer(
        await postJson(ctx.server.httpPort, JSON.stringify({ domain: `${i}${pad}`, descriptors: [{ entries: [{ key: 'user', value: 'x' }] }] })),
      );
    });
    const text = await ctx.scrape();
    ctx.note('metricsBytes', text.length);
  },
};

const overrides: Attack = {
  name: 'metrics: overrides and detailed_metric (gRPC)',
  env: () => LARGE_MESSAGES,
  async run(ctx) {
    const client = grpcClient(ctx);
    const value = (i: number, j: number) => `${i}-${j}-${'o'.repeat(4000)}`;
    // Many requests of 64 descriptors with unique values and an override each, plus
    // detailed_metric values; (full) a few requests of 3.7 MiB.
    await pool(n(ctx, 40, 1000), 8, async (i) => {
      const descriptors: Descriptor[] = Array.from({ length: 64 }, (_, j) =>
        j % 2 === 0 ? { entries: [['user', value(i, j)]], override: { requestsPerUnit: 5, unit: 1 } } : { entries: [['detailed', value(i, j)]] },
      );
      ctx.answer(await rawCall(client, encodeRequest('abuse', descriptors)));
    });
    if (ctx.scale === 'full') {
      const big = 'B'.repeat(3900);
      for (let i = 0; i < 8; i++) {
        const descriptors: Descriptor[] = Array.from({ length: 30 }, (_, j) => ({
          entries: Array.from({ length: 32 }, (_, k) => [`k${k}`, `${i}-${j}-${k}-${big}`] as const),
          override: { requestsPerUnit: 5, unit: 6 },
        }));
        ctx.answer(await rawCall(client, encodeRequest('abuse', descriptors), 20_000));
      }
    }
    client.close();
    requireOnly(ctx, 'OK');
    ctx.note('metricsBytes', (await ctx.scrape()).length);
  },
};

const memoryFlood: Attack = {
  name: 'memory backend: unique 4 KB values',
  env: () => LARGE_MESSAGES,
  async run(ctx) {
    const client = grpcClient(ctx);
    const pad = 'm'.repeat(4000);
    await pool(n(ctx, 60, 500), 8, async (i) => {
      const descriptors: Descriptor[] = Array.from({ length: 64 }, (_, j) => ({ entries: [['user', `${i}-${j}-${pad}`]] }));
      ctx.answer(await rawCall(client, encodeRequest('abuse', descriptors)));
    });
    client.close();
    requireOnly(ctx, 'OK');
    const text = await ctx.scrape();
    ctx.note('evicted', metricValue(text, 'floodgate_memory_counters_evicted_total'));
  },
};

const overLimitCache: Attack = {
  name: 'redis over-limit cache: hits_addend > limit',
  needsRedis: true,
  env: ({ redisUrl }) => ({ REDIS_URL: redisUrl as string, LOCAL_CACHE_SIZE_IN_BYTES: String(64 * 1024 * 1024) }),
  async run(ctx) {
    const client = grpcClient(ctx);
    const stamp = Date.now();
    await pool(n(ctx, 80, 800), 8, async (i) => {
      const descriptors: Descriptor[] = Array.from({ length: 64 }, (_, j) => ({ entries: [['user', `${stamp}-${i}-${j}`]] }));
      ctx.answer(await rawCall(client, encodeRequest('abuse', descriptors, 2000)));
    });
    client.close();
    requireOnly(ctx, 'OK');
  },
};

const impatientCallers: Attack = {
  name: 'redis breaker: callers with 1-3 ms deadlines',
  // Issue 18, finding 1: a caller's own deadline counted as a Redis failure, and three in a row
  // opened the breaker that every caller shares; the probe (2 s deadline) then failed with
  // UNAVAILABLE. The probe's failures are what this attack measures.
  needsRedis: true,
  env: ({ redisUrl }) => ({ REDIS_URL: redisUrl as string }),
  async run(ctx) {
    const client = grpcClient(ctx);
    const until = Date.now() + n(ctx, 3000, 15_000);
    let sent = 0;
    await pool(16, 16, async () => {
      while (Date.now() < until && sent < 1_000_000) {
        const i = sent++;
        ctx.answer(await rawCall(client, encodeRequest('abuse', [{ entries: [['user', `impatient-${i % 1000}`]] }]), 1 + (i % 3)));
      }
    });
    client.close();
  },
};

/** Redis' used_memory, in MB, at `redisUrl` (host:port). */
async function redisUsedMb(redisUrl: string): Promise<number> {
  const [host, port] = redisUrl.split(':');
  const info = parseInfo(await respCommand(host as string, Number(port), ['INFO', 'memory']));
  return Number(info.get('used_memory') ?? NaN) / 1e6;
}

/** One sliding_log attack: requests of 64 fresh descriptors, each with hits_addend 1,000. */
function slidingLogFlood(backend: 'redis' | 'memory'): Attack {
  let redisUrl: string | undefined;
  return {
    name: `sliding_log on ${backend}: 64 descriptors x hits_addend 1000`,
    withinPodLimit: backend === 'memory',
    // Issue 18, finding 2: one sorted-set entry per hit took Redis to 778 MB (96 requests) and
    // the memory backend to 648 MB of RSS (800 requests); now one entry per call.
    needsRedis: backend === 'redis',
    env: (r): Record<string, string> => {
      redisUrl = r.redisUrl;
      return backend === 'redis' ? { REDIS_URL: r.redisUrl as string } : {};
    },
    async run(ctx) {
      const client = grpcClient(ctx);
      const stamp = Date.now();
      const before = redisUrl !== undefined && backend === 'redis' ? await redisUsedMb(redisUrl) : 0;
      await pool(n(ctx, 24, backend === 'redis' ? 96 : 800), 4, async (i) => {
        const descriptors: Descriptor[] = Array.from({ length: 64 }, (_, j) => ({ entries: [['log', `${stamp}-${i}-${j}`]] }));
        ctx.answer(await rawCall(client, encodeRequest('abuse', descriptors, 1000)));
      });
      client.close();
      requireOnly(ctx, 'OK');
      if (redisUrl !== undefined && backend === 'redis')
        ctx.note('redisUsedMb', `${before.toFixed(1)}->${(await redisUsedMb(redisUrl)).toFixed(1)}`);
    },
  };
}

const memoryManyCounters: Attack = {
  name: 'memory backend: ever-new ordinary keys, default caps',
  withinPodLimit: true,
  // Issue 18, finding 15: 2.4 KB per counter took RSS to 407 MB at the old default cap of
  // 100,000 counters (the shipped pod has 256 Mi). Counters are now ~200 B and bounded by
  // MEMORY_MAX_BYTES (64 MiB): this attack makes more counters than fit.
  async run(ctx) {
    const client = grpcClient(ctx);
    const stamp = Date.now();
    await pool(n(ctx, 300, 8000), 8, async (i) => {
      const descriptors: Descriptor[] = Array.from({ length: 64 }, (_, j) => ({ entries: [['user', `${stamp}-${i}-${j}`]] }));
      ctx.answer(await rawCall(client, encodeRequest('abuse', descriptors)));
    });
    client.close();
    requireOnly(ctx, 'OK');
    ctx.note('evicted', metricValue(await ctx.scrape(), 'floodgate_memory_counters_evicted_total'));
  },
};

const memorySoak: Attack = {
  name: 'memory backend: soak, two new descriptors a request',
  // Issue 26, finding 9: ghz at about 10,000 requests a second of two new descriptors each
  // plateaued at 443 MB of RSS with the image's Node flags of then (MEMORY_MAX_BYTES 64 MiB):
  // garbage under churn, not counters. V8's old generation is now sized to the pod
  // (--max-old-space-size, deploy/Dockerfile); scripts/memory-soak.mjs is the ghz version.
  withinPodLimit: true,
  async run(ctx) {
    const client = grpcClient(ctx);
    const stamp = Date.now();
    const until = Date.now() + n(ctx, 3000, 30_000);
    let sent = 0;
    await pool(64, 64, async () => {
      while (Date.now() < until && sent < 2_000_000) {
        const i = sent++;
        const descriptors: Descriptor[] = [{ entries: [['user', `${stamp}-a-${i}`]] }, { entries: [['user', `${stamp}-b-${i}`]] }];
        ctx.answer(await rawCall(client, encodeRequest('abuse', descriptors)));
      }
    });
    client.close();
    requireOnly(ctx, 'OK');
  },
};

/** Opens `count` sockets with `start`, holds them `holdMs`, and counts how many the server closed. */
async function holdSockets(
  ctx: AttackContext,
  port: number,
  count: number,
  holdMs: number,
  start: (s: Socket, i: number) => void,
): Promise<void> {
  const sockets: Socket[] = [];
  let closedByServer = 0;
  const statuses: Record<string, number> = {};
  for (let i = 0; i < count; i++) {
    const s = connect({ host: '127.0.0.1', port });
    s.on('error', () => {});
    let head = '';
    s.on('data', (chunk: Buffer) => {
      if (head.length < 64) {
        head += chunk.toString('latin1');
        const m = /^HTTP\/1\.1 (\d+)/.exec(head);
        if (m) statuses[`http_${m[1]}`] = (statuses[`http_${m[1]}`] ?? 0) + 1;
      }
    });
    s.on('close', () => {
      if (!(s as Socket & { byUs?: boolean }).byUs) closedByServer++;
    });
    s.once('connect', () => start(s, i));
    sockets.push(s);
  }
  await sleep(holdMs);
  for (const s of sockets) {
    (s as Socket & { byUs?: boolean }).byUs = true;
    s.destroy();
  }
  ctx.answer('closedByServer', closedByServer);
  ctx.answer('stillOpen', count - closedByServer);
  for (const [k, v] of Object.entries(statuses)) ctx.answer(k, v);
}

const slowHttp: Attack = {
  name: 'http: slow 1 MiB bodies',
  // The connections the server closed (413 at once for a declared body over
  // HTTP_MAX_BODY_BYTES, else 408 after HTTP_REQUEST_TIMEOUT) are reported; the targets are
  // memory, stall and the ordinary client.
  async run(ctx) {
    const conns = n(ctx, 20, 100);
    const holdMs = n(ctx, 3000, 15_000);
    const total = 1024 * 1024 - 16;
    const chunk = Buffer.alloc(64 * 1024, 0x20);
    const timers: NodeJS.Timeout[] = [];
    await holdSockets(ctx, ctx.server.httpPort, conns, holdMs, (s) => {
      s.write(`POST /json HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${1024 * 1024}\r\n\r\n`);
      let sent = 0;
      const steps = Math.ceil(total / chunk.length);
      const timer = setInterval(
        () => {
          if (s.destroyed || sent >= total) return clearInterval(timer);
          const part = chunk.subarray(0, Math.min(chunk.length, total - sent));
          s.write(part);
          sent += part.length;
        },
        Math.max(10, Math.floor((holdMs * 0.6) / steps)),
      );
      timers.push(timer);
    });
    for (const t of timers) clearInterval(t);
  },
};

const idleGrpc: Attack = {
  name: 'grpc: idle raw TCP connections',
  // Idle connections are closed after GRPC_MAX_CONNECTION_IDLE (60 s), longer than this attack
  // holds them: the count still open is reported, the targets are memory, stall and the
  // ordinary client.
  async run(ctx) {
    await holdSockets(ctx, ctx.server.grpcPort, 50, n(ctx, 3000, 20_000), () => {});
  },
};

const wildcard: Attack = {
  name: 'wildcard: *a*a*b and *a*b against 4 KB values',
  env: () => LARGE_MESSAGES,
  async run(ctx) {
    const client = grpcClient(ctx);
    const values = 'a'.repeat(4096);
    await pool(n(ctx, 10, 100), 4, async (i) => {
      const key = i % 2 === 0 ? 'wild' : 'wild2';
      const descriptors: Descriptor[] = Array.from({ length: 64 }, () => ({ entries: [[key, values]] }));
      ctx.answer(await rawCall(client, encodeRequest('abuse', descriptors)));
    });
    client.close();
    requireOnly(ctx, 'OK');
  },
};

function aliasFile(count: number): string {
  let text = 'domain: aliases\nlimits:\n  - &limit {unit: second, requests_per_unit: 1}\n';
  for (let i = 0; i < count; i++) text += '  - *limit\n';
  return text;
}

async function reloadWith(ctx: AttackContext, name: string, text: string): Promise<void> {
  const before = await ctx.scrape();
  const errors = metricValue(before, 'ratelimit_service_config_load_error');
  const successes = metricValue(before, 'ratelimit_service_config_load_success');
  writeFileSync(join(ctx.server.rulesDir, name), text);
  const after = await metricChange(ctx, 'ratelimit_service_config_load_error', errors, 5000);
  const text2 = await ctx.scrape();
  ctx.answer('load_error', after - errors);
  ctx.answer('load_success', metricValue(text2, 'ratelimit_service_config_load_success') - successes);
}

async function restoreRules(ctx: AttackContext, name: string): Promise<void> {
  const successes = metricValue(await ctx.scrape(), 'ratelimit_service_config_load_success');
  rmSync(join(ctx.server.rulesDir, name), { force: true });
  await metricChange(ctx, 'ratelimit_service_config_load_success', successes, 5000);
}

const yamlAliases: Attack = {
  name: 'reload: YAML alias flood (16,000)',
  async run(ctx) {
    for (let i = 0; i < n(ctx, 1, 3); i++) {
      await reloadWith(ctx, 'aliases.yaml', aliasFile(16_000 + i));
      await restoreRules(ctx, 'aliases.yaml');
    }
  },
};

/** A rule file of 510 KB (under the 512 KiB limit): some 5,000 descriptors. */
export function largeRuleFile(bytes = 510 * 1024): string {
  let text = 'domain: large\ndescriptors:\n';
  for (let i = 0; text.length < bytes; i++) {
    text += `  - key: path\n    value: /api/v1/resource-${i}\n    rate_limit: {unit: minute, requests_per_unit: ${(i % 1000) + 1}}\n`;
  }
  return text;
}

/**
 * Issue 18, finding 4 (its last line): a 510 KB rule file took 1.1 s to parse, all of it on the
 * event loop. It is parsed in a worker thread now; the loop keeps answering.
 */
const largeRules: Attack = {
  name: 'reload: a 510 KB rule file',
  async run(ctx) {
    const text = largeRuleFile();
    ctx.note('file', `${(text.length / 1024).toFixed(0)} KB`);
    for (let i = 0; i < n(ctx, 1, 3); i++) {
      const before = metricValue(await ctx.scrape(), 'ratelimit_service_config_load_success');
      writeFileSync(join(ctx.server.rulesDir, 'large.yaml'), text);
      const after = await metricChange(ctx, 'ratelimit_service_config_load_success', before, 20_000);
      ctx.answer(after > before ? 'load_success' : 'not_loaded');
      await restoreRules(ctx, 'large.yaml');
    }
    requireOnly(ctx, 'load_success');
  },
};

const FAKE_SECRET = 'hunter2-fake-secret-of-the-abuse-suite';

/**
 * Issue 18, finding 12: a rule file that is a symlink to /proc/self/environ (read by the server,
 * so its own environment, here with a fake secret in it). The load error must quote at most a
 * short, escaped excerpt: the secret never reaches the log.
 */
const environRules: Attack = {
  name: 'reload: rule file linked to /proc/self/environ',
  env: () => ({ FLOODGATE_ABUSE_FAKE_SECRET: FAKE_SECRET }),
  async run(ctx) {
    for (let i = 0; i < n(ctx, 1, 3); i++) {
      const before = metricValue(await ctx.scrape(), 'ratelimit_service_config_load_error');
      symlinkSync('/proc/self/environ', join(ctx.server.rulesDir, 'environ.yaml'));
      ctx.answer('load_error', (await metricChange(ctx, 'ratelimit_service_config_load_error', before, 5000)) - before);
      await restoreRules(ctx, 'environ.yaml');
    }
    const line =
      ctx.server
        .output()
        .split('\n')
        .find((l) => l.includes('environ.yaml')) ?? '';
    ctx.note('logged line', `${line.length} characters`);
    if (ctx.server.output().includes(FAKE_SECRET)) throw new Error('the fake secret of the environment reached the log');
  },
};

function randomProtobuf(): Buffer {
  return randomBytes(Math.floor(Math.random() * 2048));
}

const randomGrpc: Attack = {
  name: 'grpc: random protobuf messages',
  async run(ctx) {
    const client = grpcClient(ctx);
    await pool(n(ctx, 300, 3000), 8, async () => ctx.answer(await rawCall(client, randomProtobuf())));
    client.close();
  },
};

function mutate(valid: Buffer): Buffer {
  const out = Buffer.from(valid);
  const edits = 1 + Math.floor(Math.random() * 4);
  let b = out;
  for (let e = 0; e < edits; e++) {
    const at = Math.floor(Math.random() * b.length);
    switch (Math.floor(Math.random() * 4)) {
      case 0:
        b[at] = Math.floor(Math.random() * 256);
        break;
      case 1:
        b = b.subarray(0, at);
        break;
      case 2:
        b = Buffer.concat([b.subarray(0, at), randomBytes(1 + Math.floor(Math.random() * 8)), b.subarray(at)]);
        break;
      default:
        b = Buffer.concat([b.subarray(0, at), b.subarray(at, at + 16), b.subarray(at)]);
    }
  }
  return b;
}

const mutatedGrpc: Attack = {
  name: 'grpc: mutated protobuf messages',
  async run(ctx) {
    const client = grpcClient(ctx);
    const samples = [
      encodeRequest('abuse', [{ entries: [['user', 'alice']] }], 1),
      encodeRequest('abuse', [{ entries: [['user', 'bob']], override: { requestsPerUnit: 10, unit: 2 } }, { entries: [['wild', 'xaab']] }]),
      encodeRequest(
        'abuse',
        [
          {
            entries: [
              ['detailed', 'v'],
              ['more', 'w'],
            ],
          },
          { entries: [['zero', 'z']] },
        ],
        3,
      ),
      encodeRequest('probe', [{ entries: [['k', 'v']] }]),
    ];
    await pool(n(ctx, 300, 3000), 8, async () => ctx.answer(await rawCall(client, mutate(pick(samples)))));
    client.close();
  },
};

function randomJson(depth = 0): unknown {
  switch (Math.floor(Math.random() * (depth > 3 ? 4 : 7))) {
    case 0:
      return Math.random() < 0.5 ? null : Math.random() < 0.5;
    case 1:
      return Math.floor(Math.random() * 2 ** 40) * (Math.random() < 0.5 ? -1 : 1);
    case 2:
      return randomBytes(Math.floor(Math.random() * 64)).toString('latin1');
    case 3:
      return pick(['abuse', 'probe', 'user', '', 'SECOND', 'HOUR']);
    case 4:
      return Array.from({ length: Math.floor(Math.random() * 5) }, () => randomJson(depth + 1));
    default: {
      const keys = [
        'domain',
        'descriptors',
        'entries',
        'key',
        'value',
        'hitsAddend',
        'hits_addend',
        'limit',
        'requestsPerUnit',
        'unit',
        '__proto__',
        'x',
      ];
      const o: Record<string, unknown> = {};
      for (let i = Math.floor(Math.random() * 5); i > 0; i--)
        Object.defineProperty(o, pick(keys), { value: randomJson(depth + 1), enumerable: true, configurable: true, writable: true });
      return o;
    }
  }
}

const randomJsonBodies: Attack = {
  name: 'http: random /json bodies',
  async run(ctx) {
    await pool(n(ctx, 300, 3000), 8, async (i) => {
      const body = i % 3 === 0 ? randomBytes(Math.floor(Math.random() * 512)) : JSON.stringify(randomJson());
      ctx.answer(await postJson(ctx.server.httpPort, body));
    });
  },
};

function randomRuleFile(): string {
  const fragments = [
    'domain: r\n',
    'descriptors:\n',
    '  - key: k\n',
    '    value: "*x*"\n',
    '    rate_limit: {unit: second, requests_per_unit: 5}\n',
    '    rate_limit: &a {unit: minute, requests_per_unit: 1}\n',
    '    rate_limit: *a\n',
    '    descriptors:\n',
    '      - key: j\n',
    '    detailed_metric: true\n',
    '    share_threshold: true\n',
    'a: &b [*b]\n',
    '- [[[[[[[[\n',
    '{{{: }\n',
    '  ? complex\n',
    '!!binary aGVsbG8=\n',
    '"\\u0000"\n',
  ];
  let text = '';
  for (let i = Math.floor(Math.random() * 12); i > 0; i--) text += Math.random() < 0.85 ? pick(fragments) : randomBytes(16).toString('latin1');
  return text;
}

const randomRules: Attack = {
  name: 'reload: random rule files',
  async run(ctx) {
    for (let i = 0; i < n(ctx, 6, 40); i++) {
      writeFileSync(join(ctx.server.rulesDir, 'random.yaml'), randomRuleFile());
      await sleep(300);
    }
    const text = await ctx.scrape();
    ctx.answer('load_error', metricValue(text, 'ratelimit_service_config_load_error'));
    ctx.answer('load_success', metricValue(text, 'ratelimit_service_config_load_success'));
    await restoreRules(ctx, 'random.yaml');
  },
};

/** Sends raw bytes as a ShouldRateLimit call; resolves with the overall code, or the status name of an error. */
function overallCodeOf(client: grpc.Client, body: Buffer, timeoutMs: number): Promise<string> {
  return new Promise((resolve) => {
    client.makeUnaryRequest(
      METHOD,
      (b: Buffer) => b,
      (b: Buffer) => b,
      body,
      { deadline: Date.now() + timeoutMs },
      (err: grpc.ServiceError | null, reply?: Buffer) => {
        if (err) return resolve(grpc.status[err.code] ?? String(err.code));
        // overall_code is field 1 (varint): 1 OK, 2 OVER_LIMIT; absent is UNKNOWN.
        resolve(reply?.[0] === 0x08 ? (['UNKNOWN', 'OK', 'OVER_LIMIT'][reply[1] ?? 0] ?? 'UNKNOWN') : 'UNKNOWN');
      },
    );
  });
}

/** A policy that boxes a client from its third call: every request weighs 1 (issue 18). */
export const BOXING_POLICY = `domain: boxed
policy:
  client: user
  window_seconds: 60
  weights: { requests: 1, repeats: 0, routes: 0, denials: 0 }
  thresholds: { elevated: 1, suspicious: 2, blocked: 3 }
  blocked_seconds: 300
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 1000000 }
`;

const policyDeadlines: Attack = {
  name: 'policy: 1 ms deadlines vs a boxed abuser (redis)',
  // Calls that give up at once are no Redis failure: the policy's breaker stays closed, so
  // the boxed abuser stays boxed (before: 29 OK of 100, the breaker open most of the time).
  needsRedis: true,
  rules: { 'boxed.yaml': BOXING_POLICY },
  env: ({ redisUrl }) => ({ REDIS_URL: redisUrl as string }),
  async run(ctx) {
    const client = grpcClient(ctx);
    const abuser = encodeRequest('boxed', [{ entries: [['user', `abuser-${Date.now()}`]] }]);
    // Three calls box it (the third is the first denied).
    for (let i = 0; i < 3; i++) ctx.answer(`boxing_${await overallCodeOf(client, abuser, 2000)}`);
    let attacking = true;
    const attacker = (async () => {
      for (let round = 0; attacking && round < 1000; round++) {
        // Three calls that give up after 1 ms; the descriptor names a client but no rule.
        const calls = [0, 1, 2].map((i) =>
          overallCodeOf(
            client,
            encodeRequest('boxed', [
              {
                entries: [
                  ['user', `attacker-${i}`],
                  ['x', 'y'],
                ],
              },
            ]),
            1,
          ),
        );
        for (const c of await Promise.all(calls)) ctx.answer(`attacker_${c}`);
        await sleep(400);
      }
    })();
    const calls = n(ctx, 30, 100);
    for (let i = 0; i < calls; i++) {
      ctx.answer(`abuser_${await overallCodeOf(client, abuser, 2000)}`);
      await sleep(40);
    }
    attacking = false;
    await attacker;
    client.close();
    ctx.note('abuserOK', `${ctx.answers.abuser_OK ?? 0} of ${calls}`);
    if ((ctx.answers.abuser_OVER_LIMIT ?? 0) !== calls) throw new Error(`the boxed abuser got out: ${JSON.stringify(ctx.answers)}`);
  },
};

const policyMemoryClients: Attack = {
  name: 'policy (memory): 100,000 clients with 4,000 B values',
  withinPodLimit: true,
  // Each client is kept under a digest of its identity, not its value (before: 688 MB RSS).
  rules: { 'boxed.yaml': BOXING_POLICY },
  async run(ctx) {
    const client = grpcClient(ctx);
    const pad = 'p'.repeat(4000);
    await pool(n(ctx, 5000, 100_000), 4, async (i) => {
      // A client entry and no rule for the descriptor: only the policy keeps anything.
      ctx.answer(
        await rawCall(
          client,
          encodeRequest('boxed', [
            {
              entries: [
                ['user', `${i}-${pad}`],
                ['x', 'y'],
              ],
            },
          ]),
        ),
      );
    });
    client.close();
    requireOnly(ctx, 'OK');
  },
};

// ---- issue 18: the stats paths ----

/** Runs `send()` from `workers` loops until `ms` have passed. */
async function during(ms: number, workers: number, send: (seq: number) => Promise<void>): Promise<void> {
  const until = Date.now() + ms;
  let seq = 0;
  await Promise.all(
    Array.from({ length: workers }, async () => {
      while (Date.now() < until) await send(seq++);
    }),
  );
}

const mappedMetrics: Attack = {
  name: 'metrics: unknown domains, PROMETHEUS_MAPPER_YAML',
  env: () => ({
    PROMETHEUS_MAPPER_YAML: join(projectRoot, 'test/fixtures/statsd-exporter/default_mapper.yaml'),
    STATS_FLUSH_INTERVAL: '1s',
  }),
  // Issue 18, finding 5: 25 s of unknown domains gave 30,042 metric names, a 15.7 MB /metrics and
  // 396 MB of RSS. Unknown 4 KB domains and unique 4 KB detailed_metric values through /json.
  async run(ctx) {
    const pad = 'd'.repeat(4000);
    await during(n(ctx, 3000, 25_000), 16, async (i) => {
      const body =
        i % 4 === 3
          ? { domain: 'abuse', descriptors: [{ entries: [{ key: 'detailed', value: `${i}${pad}` }] }] }
          : { domain: `${i}${pad}`, descriptors: [{ entries: [{ key: 'user', value: 'x' }] }] };
      ctx.answer(await postJson(ctx.server.httpPort, JSON.stringify(body)));
    });
    await sleep(1500); // one flush into the mapped registry
    const started = Date.now();
    const text = await ctx.scrape();
    const names = new Set(
      text
        .split('\n')
        .filter((l) => l !== '' && !l.startsWith('#'))
        .map((l) => /^[^{ ]+/.exec(l)?.[0]),
    );
    ctx.note('metricNames', names.size);
    ctx.note('metricsKB', Math.round(text.length / 1024));
    ctx.note('scrapeMs', Date.now() - started);
    ctx.note('unknownDomains', metricValue(text, 'ratelimit_service_domain_not_found\\{domain="\\(unknown\\)"\\}'));
    if (names.size > 500) throw new Error(`${names.size} metric names`);
  },
};

/**
 * Issue 18, finding 7: with a detailed_metric rule, requests of 15 × 4 KB values took RSS to
 * 357 MB (TCP) and 422 MB (UDP), and over TCP flushes past 4 MiB were dropped whole: only 107-149
 * of an ordinary client's 450 hits reached statsd.
 */
function statsdNames(protocol: 'tcp' | 'udp'): Attack {
  const sink = new StatsdSink('ratelimit.service.rate_limit.abuse.user.total_hits');
  return {
    name: `statsd: detailed_metric 15 × 4 KB values (${protocol.toUpperCase()})`,
    env: async () => ({
      USE_STATSD: 'true',
      STATSD_HOST: '127.0.0.1',
      STATSD_PORT: String(await sink.listen(protocol)),
      STATSD_PROTOCOL: protocol,
      STATS_FLUSH_INTERVAL: '1s',
    }),
    dispose: () => sink.close(),
    async run(ctx) {
      const client = grpcClient(ctx);
      const ms = n(ctx, 3000, 20_000);
      const hits = n(ctx, 60, 450);
      const ordinary = (async () => {
        for (let i = 0; i < hits; i++) {
          ctx.answer(`ordinary_${await rawCall(client, encodeRequest('abuse', [{ entries: [['user', 'ordinary']] }]))}`);
          await sleep(ms / hits);
        }
      })();
      const pad = 'x'.repeat(4000);
      await during(ms, 8, async (i) => {
        const descriptors: Descriptor[] = Array.from({ length: 15 }, (_, j) => ({ entries: [['detailed', `${i}-${j}-${pad}`]] }));
        ctx.answer(await rawCall(client, encodeRequest('abuse', descriptors)));
      });
      await ordinary;
      client.close();
      await sleep(2500); // two flushes
      const got = await sink.totals();
      ctx.note('ordinaryHitsAtStatsd', `${got.sum}/${hits}`);
      ctx.note('statsdMB', (got.received / 1024 / 1024).toFixed(1));
      ctx.note('longestLine', got.longest);
      if (got.kernelDrops > 0) ctx.note('sinkKernelDrops', got.kernelDrops);
      if (got.sum !== hits) {
        const where = got.kernelDrops > 0 ? ` (the sink's kernel buffer dropped ${got.kernelDrops} datagrams)` : '';
        throw new Error(`statsd got ${got.sum} of the ordinary client's ${hits} hits${where}`);
      }
    },
  };
}

const unfinishedGrpc: Attack = {
  name: 'grpc: unfinished calls (raw HTTP/2)',
  // Issue 18, finding 3: each stream sends 65,000 of a declared 65,530 bytes and never ends.
  // GRPC_MAX_CONCURRENT_STREAMS caps the streams (the client opens no more than SETTINGS allow);
  // GRPC_MAX_REQUEST_RECEIVE_TIME (10 s) resets them.
  async run(ctx) {
    const result = await partialCalls({
      port: ctx.server.grpcPort,
      connections: n(ctx, 2, 6),
      streamsPerConnection: n(ctx, 100, 1000),
      declaredBytes: 65_530,
      sentBytes: 65_000,
      holdMs: n(ctx, 2000, 12_000),
    });
    ctx.answer('opened', result.opened);
    ctx.answer('closedByServer', result.closedByServer);
    ctx.note('maxConcurrentStreams', result.maxConcurrentStreams ?? 'unknown');
    if (ctx.scale === 'full') ctx.note('lastClosedAfterMs', result.lastCloseMs);
  },
};

const rapidResetGrpc: Attack = {
  name: 'grpc: rapid reset, reconnecting (raw HTTP/2)',
  // Issue 18, finding 10: complete calls reset at once, on one connection after another;
  // each connection is closed after GRPC_MAX_RESET_BURST resets (plus 20 a second).
  async run(ctx) {
    const request = encodeRequest('probe', [{ entries: [['k', 'reset']] }]);
    const until = Date.now() + n(ctx, 3000, 15_000);
    let worst = 0;
    while (Date.now() < until) {
      const r = await rapidReset({ port: ctx.server.grpcPort, calls: 5000, request, timeoutMs: Math.max(100, until - Date.now()) });
      ctx.answer('connections');
      ctx.answer('resets', r.resets);
      if (r.closedByServer) ctx.answer('closedByServer');
      if (r.goawayLastStreamId !== undefined) worst = Math.max(worst, (r.goawayLastStreamId + 1) / 2);
    }
    ctx.note('mostCallsOnOneConnection', worst);
  },
};

const slowlorisHttp: Attack = {
  name: 'http: slowloris, 1,024 slow headers (default bounds)',
  withinPodLimit: true,
  // Issue 26, finding 7: 1,024 connections sending headers a byte every 500 ms took every slot
  // of the HTTP port; /healthcheck on a fresh connection (the kubelet's probe) got 36 resets
  // and 7 answers of 200. A full port now closes the connection waiting longest without a
  // whole request (connection-slots.ts). The probe's answers are counted as health_<status>.
  async run(ctx) {
    const port = ctx.server.httpPort;
    const idle = await healthProbes(port, 5);
    ctx.note('idleProbe', JSON.stringify(idle));
    const attack = slowloris(port, 1024, '127.0.0.1');
    try {
      for (let i = 0; i < 100 && attack.open < 1024; i++) await sleep(100);
      const rounds = n(ctx, 1, 5);
      for (let r = 0; r < rounds; r++) {
        for (const [status, count] of Object.entries(await healthProbes(port, 15))) ctx.answer(`health_${status}`, count);
      }
      ctx.note('closedByServer', attack.closedByServer);
    } finally {
      attack.stop();
    }
    requireOnly(ctx, 'health_200');
  },
};

/** Every attack of issue 8, in the order they are run. */
export const ATTACKS: readonly Attack[] = [
  emptyDescriptors,
  unknownDomains,
  overrides,
  memoryFlood,
  overLimitCache,
  impatientCallers,
  slidingLogFlood('redis'),
  slidingLogFlood('memory'),
  memoryManyCounters,
  memorySoak,
  slowHttp,
  idleGrpc,
  wildcard,
  yamlAliases,
  environRules,
  largeRules,
  randomGrpc,
  mutatedGrpc,
  randomJsonBodies,
  randomRules,
  policyDeadlines,
  policyMemoryClients,
  mappedMetrics,
  statsdNames('tcp'),
  statsdNames('udp'),
  unfinishedGrpc,
  rapidResetGrpc,
  slowlorisHttp,
  ...GRPC_BOUNDS_ATTACKS,
  ...XDS_ATTACKS,
  ...RULES_ATTACKS,
];
