// The xDS attacks of issue 18 (findings 4 and 9): the server takes its rules from the
// go-control-plane test server (test/xds-server), which the attack drives.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startXdsServer, type RateLimitConfigJson, type XdsServer } from '../helpers/xds-server';
import type { Attack, AttackContext, AttackSetup } from './abuse-harness';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const n = (ctx: AttackContext, short: number, full: number): number => (ctx.scale === 'short' ? short : full);

/** The probe client's domain, as PROBE_RULES has it. */
const PROBE: RateLimitConfigJson = {
  name: 'probe',
  domain: 'probe',
  descriptors: [{ key: 'k', rate_limit: { unit: 'SECOND', requests_per_unit: 1_000_000 } }],
};

/** A small resource: 9,000 of them are 2.85 MiB, under gRPC's 4 MiB default. */
const small = (i: number, limit: number): RateLimitConfigJson => ({
  name: `res-${String(i).padStart(5, '0')}`,
  domain: `domain-${i}`,
  descriptors: [
    { key: 'remote_address', rate_limit: { unit: 'SECOND', requests_per_unit: limit } },
    { key: 'path', value: '/api/*', rate_limit: { unit: 'MINUTE', requests_per_unit: 100, name: 'api' }, shadow_mode: true },
  ],
});

function metric(text: string, name: string): number {
  return Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? 0);
}

/** An attack against a server in CONFIG_TYPE=GRPC_XDS_SOTW, with the management server it drives. */
function xdsAttack(name: string, run: (ctx: AttackContext, server: XdsServer) => Promise<void>): Attack {
  let xds: XdsServer | undefined;
  return {
    name,
    async setup(): Promise<AttackSetup> {
      const dir = mkdtempSync(join(tmpdir(), 'floodgate-abuse-xds-'));
      const server = await startXdsServer({ statePath: join(dir, 'state.json') });
      await server.push('v0', [PROBE]);
      xds = server;
      return {
        env: {
          CONFIG_TYPE: 'GRPC_XDS_SOTW',
          CONFIG_GRPC_XDS_SERVER_URL: server.address,
          CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL: '100ms',
        },
        async teardown() {
          await server.kill();
          rmSync(dir, { recursive: true, force: true });
        },
      };
    },
    async run(ctx) {
      if (!xds) throw new Error('no management server');
      const first = Date.now() + 10_000;
      while (metric(await ctx.scrape(), 'ratelimit_service_config_load_success') < 1) {
        if (Date.now() > first) throw new Error('the first xDS snapshot did not load within 10 s');
        await sleep(50);
      }
      await run(ctx, xds);
    },
  };
}

/** Finding 4: snapshots of 9,000 resources, each compiled in slices while the old rules serve. */
const bigSnapshot = xdsAttack('xds: 9,000-resource snapshots (2.85 MiB)', async (ctx, xds) => {
  const count = 9000;
  for (let round = 0; round < n(ctx, 1, 3); round++) {
    const loads = metric(await ctx.scrape(), 'ratelimit_service_config_load_success');
    const start = Date.now();
    await xds.push(`big-${round}`, [PROBE, ...Array.from({ length: count - 1 }, (_, i) => small(i, round + 2))]);
    for (;;) {
      // Scraped every 100 ms: the worst event-loop delay is read across the whole compile.
      const text = await ctx.scrape();
      if (metric(text, 'ratelimit_service_config_load_success') > loads) break;
      if (metric(text, 'ratelimit_service_config_load_error') > 0) throw new Error('the snapshot was rejected');
      if (Date.now() - start > 60_000) throw new Error('the snapshot did not load within 60 s');
      await sleep(100);
    }
    ctx.answer('loaded');
    ctx.note(`round ${round + 1} in force after`, `${Date.now() - start} ms`);
  }
});

/** Finding 9: two bad snapshots alternating as fast as the management server takes them. */
const alternatingBadSnapshots = xdsAttack('xds: alternating bad snapshots (NACK flood)', async (ctx, xds) => {
  const badA = [PROBE, { name: 'bad-a', domain: 'a', descriptors: [{ key: 'k', rate_limit: { requests_per_unit: 1 } }] }];
  const badB = [PROBE, { name: 'bad-b', domain: '', descriptors: [] }];
  const seconds = n(ctx, 3, 10);
  const nacksBefore = (await xds.requests()).filter((r) => r.error_detail).length;
  const until = Date.now() + seconds * 1000;
  let pushes = 0;
  for (let i = 0; Date.now() < until && i < 200_000; i++) {
    await xds.push(i % 2 === 0 ? 'bad-a' : 'bad-b', i % 2 === 0 ? badA : badB);
    pushes++;
    if (i % 50 === 0) await ctx.scrape();
  }
  const nacks = (await xds.requests()).filter((r) => r.error_detail).length - nacksBefore;
  ctx.answer('pushes', pushes);
  ctx.answer('NACKs', nacks);
  ctx.note('NACKs per second', (nacks / seconds).toFixed(1));
  const errors = metric(await ctx.scrape(), 'ratelimit_service_config_load_error');
  ctx.note('load errors counted', errors);
  // Paced at about 4 a second (was 13,391 in 10 s).
  if (nacks > seconds * 4 + 5) throw new Error(`${nacks} NACKs in ${seconds} s: not paced`);
});

export const XDS_ATTACKS: readonly Attack[] = [bigSnapshot, alternatingBadSnapshots];
