// Issue 26's attacks on the gRPC port (findings 1, 2 and 6), at the issue's size in `npm run
// abuse`: unfinished 64 KiB messages on 256 × 100 streams, raw connections holding every slot
// while fresh clients and probes connect, and rapid reset with `grpc-timeout: 1m` or before the
// message, reconnecting. Each also holds the memory target: 80 % of the shipped pod's
// memory limit (deploy/kubernetes/base).
import * as grpc from '@grpc/grpc-js';
import { readFileSync } from 'node:fs';
import { loadProtos } from '../../src/grpc/protos';
import { podMemoryBoundMib, shippedPodLimitMib } from '../helpers/pod-memory';
import type { Attack, AttackContext } from './abuse-harness';
import { holdConnectionSlots, partialCalls, rapidReset } from './http2-attacks';

/** 80 % of the shipped pod memory limit (deploy/kubernetes/base), in MiB as the harness prints them. */
const POD_SHARE_MB = podMemoryBoundMib();

const n = (ctx: AttackContext, short: number, full: number): number => (ctx.scale === 'short' ? short : full);

/** The server's peak resident memory so far (VmHWM), in MB (MiB, as the harness counts). */
function peakMb(ctx: AttackContext): number {
  const status = readFileSync(`/proc/${ctx.server.proc.pid}/status`, 'utf8');
  return Number(/^VmHWM:\s+(\d+) kB/m.exec(status)?.[1] ?? 0) / 1024;
}

function holdPodShare(ctx: AttackContext): void {
  const peak = peakMb(ctx);
  ctx.note('podShareMb', Math.round(POD_SHARE_MB));
  if (peak >= POD_SHARE_MB)
    throw new Error(`peak RSS ${peak.toFixed(0)} MB >= 80 % of the pod's ${shippedPodLimitMib()} Mi (${POD_SHARE_MB.toFixed(0)} MB)`);
}

function unfinishedMessages(sentBytes: number, label: string): Attack {
  return {
    name: `grpc: 256 x 100 streams ${label}, never finished (issue 26)`,
    // Finding 1: GRPC_MAX_UNFINISHED_REQUEST_BYTES (8 MiB, each open call counting 16 KiB)
    // resets the streams arriving longest; held under GRPC_MAX_REQUEST_RECEIVE_TIME (10 s).
    async run(ctx) {
      const result = await partialCalls({
        port: ctx.server.grpcPort,
        connections: n(ctx, 16, 256),
        streamsPerConnection: 100,
        declaredBytes: 65_536,
        sentBytes,
        // Each connection first finishes one whole call: proven, it is the last the slots evict.
        callFirst: true,
        holdMs: n(ctx, 2000, 8000),
      });
      ctx.answer('opened', result.opened);
      ctx.answer('resetByServer', result.closedByServer);
      holdPodShare(ctx);
    },
  };
}

/** ShouldRateLimit for domain `probe`, descriptor k=v (protobuf bytes; PROBE_RULES has it). */
const PROBE_REQUEST = Buffer.from([0x0a, 5, ...Buffer.from('probe'), 0x12, 8, 0x0a, 6, 0x0a, 1, 0x6b, 0x12, 1, 0x76]);

/** One call and one health check, each on a connection of its own; the statuses counted. */
async function freshClient(ctx: AttackContext): Promise<void> {
  const own = { 'grpc.use_local_subchannel_pool': 1 };
  const protos = loadProtos();
  const rls = new protos.rlsClient(ctx.grpcAddress, grpc.credentials.createInsecure(), own);
  const call = await new Promise<string>((resolve) => {
    rls.makeUnaryRequest(
      '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit',
      (b: Buffer) => b,
      (b: Buffer) => b,
      PROBE_REQUEST,
      { deadline: Date.now() + 3000 },
      (err: grpc.ServiceError | null) => resolve(err ? (grpc.status[err.code] ?? String(err.code)) : 'OK'),
    );
  });
  rls.close();
  ctx.answer(`fresh_${call}`);
  const health = new protos.healthClient(ctx.grpcAddress, grpc.credentials.createInsecure(), own);
  const probe = await new Promise<string>((resolve) => {
    (health as unknown as { Check: (r: object, o: object, cb: (e: grpc.ServiceError | null) => void) => void }).Check(
      { service: '' },
      { deadline: Date.now() + 3000 },
      (err) => resolve(err ? (grpc.status[err.code] ?? String(err.code)) : 'OK'),
    );
  });
  health.close();
  ctx.answer(`probe_${probe}`);
}

const slotHolders: Attack = {
  name: 'grpc: 256 raw connections holding the slots, reopened (issue 26)',
  // Finding 2: a full port makes room (connection-slots.ts); a fresh client and a probe, each
  // on a connection of its own, are answered.
  async run(ctx) {
    let fresh = 0;
    const held = await holdConnectionSlots({
      port: ctx.server.grpcPort,
      connections: 256,
      holdMs: n(ctx, 4000, 12_000),
      onTick: async (elapsed) => {
        if (elapsed < 1500) return;
        fresh++;
        await freshClient(ctx);
      },
    });
    ctx.note('slotHoldersOpened', held.opened);
    ctx.note('slotHoldersClosedByServer', held.closedByServer);
    const ok = (ctx.answers['fresh_OK'] ?? 0) + (ctx.answers['probe_OK'] ?? 0);
    if (ok !== 2 * fresh) throw new Error(`fresh clients and probes: ${ok} of ${2 * fresh} answered OK`);
    holdPodShare(ctx);
  },
};

function resetVariant(label: string, extra: { headers?: Record<string, string>; resetBeforeMessage?: boolean }): Attack {
  return {
    name: `grpc: rapid reset ${label}, reconnecting (issue 26)`,
    // Finding 6: the allowance (100, then 20 a second) holds whatever the headers, and a peer
    // that reconnects keeps what it spent.
    async run(ctx) {
      const request = PROBE_REQUEST;
      const until = Date.now() + n(ctx, 3000, 15_000);
      let worst = 0;
      while (Date.now() < until) {
        const r = await rapidReset({ port: ctx.server.grpcPort, calls: 5000, request, timeoutMs: Math.max(100, until - Date.now()), ...extra });
        ctx.answer('connections');
        ctx.answer('resets', r.resets);
        if (r.closedByServer) ctx.answer('closedByServer');
        worst = Math.max(worst, r.goawayLastStreamId === undefined ? r.resets : (r.goawayLastStreamId + 1) / 2);
      }
      ctx.note('mostCallsOnOneConnection', worst);
      // GRPC_MAX_RESET_BURST (what the peer has left of it), plus
      // the calls in flight at the GOAWAY (at most 100), plus the rest of the read in which the
      // guard said GOAWAY, which nghttp2 processes whole and whose size depends on the machine's
      // speed (64 KiB, one call taking at least 36 bytes): seen 254-453. Without the guard a
      // connection lasts all 5,000.
      const most = 100 + 100 + Math.ceil(65_536 / 36);
      if (worst > most) throw new Error(`a connection lasted ${worst} calls (more than ${most})`);
      holdPodShare(ctx);
    },
  };
}

export const GRPC_BOUNDS_ATTACKS: readonly Attack[] = [
  unfinishedMessages(65_535, 'of 65,535 of 65,536 bytes'),
  unfinishedMessages(0, 'of a 5-byte prefix only'),
  slotHolders,
  resetVariant("with 'grpc-timeout: 1m'", { headers: { 'grpc-timeout': '1m' } }),
  resetVariant('before the message', { resetBeforeMessage: true }),
];
