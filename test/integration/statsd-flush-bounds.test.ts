// Issue 18, finding 7: over TCP a flush larger than the 4 MiB bound was dropped whole, and with it
// every ordinary stat it carried. A real statsd stand-in on loopback reads what arrives.
import { createServer, type Server } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createStatsdTransport, MAX_PENDING_BYTES } from '../../src/metrics/statsd-transport';
import { waitUntil } from '../harness/wait';

const MiB = 1024 * 1024;

/** A statsd that reads every byte it is sent, as lines. */
async function readingStatsd(): Promise<{ server: Server; port: number; received: () => string }> {
  let text = '';
  const server = createServer((socket) => socket.on('data', (chunk: Buffer) => (text += chunk.toString())));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return { server, port: address.port, received: () => text };
}

let cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.reverse()) await c();
  cleanups = [];
});

describe('a flush larger than the pending bound (TCP)', () => {
  it('is sent in bounded writes: only what exceeds the bound is dropped, never the whole flush, and no line is cut', async () => {
    const statsd = await readingStatsd();
    cleanups.push(() => new Promise<void>((resolve) => statsd.server.close(() => resolve())));
    const transport = createStatsdTransport({ host: '127.0.0.1', port: statsd.port, protocol: 'tcp' });
    cleanups.push(() => transport.close());
    // Connected first, as a running server is.
    transport.send('ratelimit.service.config_load_success:1|c\n');
    await waitUntil('connected', () => (statsd.received() !== '' ? true : undefined), { timeoutMs: 20_000 });

    const line = (i: number) => `ratelimit.service.rate_limit.shop.detailed_${String(i).padStart(8, '0')}_${'v'.repeat(100)}.total_hits:1|c\n`;
    let flush = '';
    for (let i = 0; flush.length < 6 * MiB; i++) flush += line(i);
    flush += 'ratelimit.service.rate_limit.probe.k.total_hits:450|c\n';
    const total = Buffer.byteLength(flush);
    transport.send(flush);
    const before = statsd.received().length;
    await waitUntil('the flush delivered', () => (statsd.received().length - before + transport.droppedBytes() >= total ? true : undefined), {
      timeoutMs: 20_000,
    });
    const delivered = statsd.received().length - before;
    console.log(
      `one flush of ${(total / MiB).toFixed(1)} MiB over TCP: ${(delivered / MiB).toFixed(1)} MiB delivered, ${(transport.droppedBytes() / MiB).toFixed(1)} MiB dropped`,
    );
    expect(delivered).toBeGreaterThanOrEqual(MAX_PENDING_BYTES - 64 * 1024);
    expect(delivered + transport.droppedBytes()).toBe(total);
    for (const l of statsd
      .received()
      .split('\n')
      .filter((x) => x !== ''))
      expect(l).toMatch(/^ratelimit\.service\.[a-z_.0-9]+:\d+\|c$/);
  }, 30_000);
});
