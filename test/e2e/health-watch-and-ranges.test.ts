// Issue 8, small ones: many health Watch streams, a Watch on an unknown service at shutdown, and
// out-of-range numbers echoed exactly.
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { loadProtos } from '../../src/grpc/protos';
import { startTestApp, type TestApp } from '../helpers/test-app';
import { waitUntil } from '../harness/wait';

const RULES = {
  't.yaml': `
domain: t
descriptors:
  - key: k
    rate_limit: { unit: hour, requests_per_unit: 10 }
`,
};

function watch(client: grpc.Client, service: string): { seen: string[]; ended: Promise<void>; call: grpc.ClientReadableStream<unknown> } {
  const call = (client as unknown as { Watch: (r: unknown) => grpc.ClientReadableStream<{ status: string }> }).Watch({ service });
  const seen: string[] = [];
  const ended = new Promise<void>((resolve) => {
    call.on('data', (m: { status: string }) => seen.push(m.status));
    call.on('end', () => resolve());
    call.on('error', () => resolve());
  });
  return { seen, ended, call };
}

describe('health Watch streams', () => {
  test('12 Watch streams raise no MaxListenersExceededWarning; all see the change at shutdown', async () => {
    const warnings: Error[] = [];
    const onWarning = (w: Error): void => {
      warnings.push(w);
    };
    process.on('warning', onWarning);
    const t = await startTestApp(RULES, { SHUTDOWN_GRACE_MS: '60000' });
    const health = new (loadProtos().healthClient)(`127.0.0.1:${t.app.grpcPort}`, grpc.credentials.createInsecure());
    try {
      const watches = Array.from({ length: 12 }, () => watch(health, 'ratelimit'));
      await waitUntil('the first message of every Watch', () => watches.every((w) => w.seen.length > 0), { timeoutMs: 15_000 });
      expect(watches.every((w) => w.seen[0] === 'SERVING')).toBe(true);
      await new Promise((r) => setImmediate(r));
      expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([]);
      const t0 = Date.now();
      await t.stop();
      await Promise.all(watches.map((w) => w.ended));
      // Far less than the 60 s grace: the Watches did not hold the shutdown.
      expect(Date.now() - t0).toBeLessThan(20_000);
      expect(watches.every((w) => w.seen.at(-1) === 'NOT_SERVING')).toBe(true);
    } finally {
      process.off('warning', onWarning);
      health.close();
    }
  });

  test('a Watch on an unknown service is ended at shutdown, which does not wait for the grace period', async () => {
    const t = await startTestApp(RULES, { SHUTDOWN_GRACE_MS: '60000' });
    const health = new (loadProtos().healthClient)(`127.0.0.1:${t.app.grpcPort}`, grpc.credentials.createInsecure());
    try {
      const w = watch(health, 'no-such-service');
      await waitUntil('the first Watch message', () => w.seen.length > 0, { timeoutMs: 15_000 });
      expect(w.seen).toEqual(['SERVICE_UNKNOWN']);
      const t0 = Date.now();
      await t.stop();
      const ms = Date.now() - t0;
      console.log(`shutdown with a Watch on an unknown service open: ${ms} ms (grace 60000 ms)`);
      expect(ms).toBeLessThan(20_000);
      await w.ended;
    } finally {
      health.close();
    }
  });
});

describe('a descriptor hits_addend is a uint64: counted whatever its size (issue 27)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp(RULES);
  });
  afterAll(async () => {
    await t.stop();
  });

  test('a descriptor hits_addend of 2^64-1 is over the limit, as the reference answers it (not INVALID_ARGUMENT)', async () => {
    const res = await t.client.shouldRateLimit({
      domain: 't',
      descriptors: [{ entries: [{ key: 'k', value: 'v' }], hits_addend: { value: '18446744073709551615' as unknown as number } }],
    });
    expect(res.overall_code).toBe('OVER_LIMIT');
    expect(res.statuses[0]!.limit_remaining).toBe(0);
  });

  test('an in-range hits_addend still counts', async () => {
    const res = await t.client.shouldRateLimit({
      domain: 't',
      descriptors: [{ entries: [{ key: 'k', value: 'ok' }], hits_addend: { value: 3 } }],
    });
    expect(res.statuses[0]!.limit_remaining).toBe(7);
  });
});
