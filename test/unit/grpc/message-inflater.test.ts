// The compressed request message of the http2 RLS handler (issue 29): inflated within the
// bound, and off the event loop (node's thread pool), as grpc-js does with its zlib streams.
import { deflateSync, gunzipSync, gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { inflateMessage, MessageInflater } from '../../../src/grpc/message-inflater';

const MIB = 1024 * 1024;

describe('inflateMessage', () => {
  const message = Buffer.from('hello, rate limit service');

  it('inflates gzip and deflate', async () => {
    await expect(inflateMessage('gzip', gzipSync(message), 1024)).resolves.toEqual(message);
    await expect(inflateMessage('deflate', deflateSync(message), 1024)).resolves.toEqual(message);
    await expect(inflateMessage('gzip', gzipSync(Buffer.alloc(0)), 1024)).resolves.toEqual(Buffer.alloc(0));
  });

  it('refuses past the bound (ERR_BUFFER_TOO_LARGE), and bytes that are not of the encoding', async () => {
    await expect(inflateMessage('gzip', gzipSync(Buffer.alloc(1025)), 1024)).rejects.toMatchObject({ code: 'ERR_BUFFER_TOO_LARGE' });
    await expect(inflateMessage('deflate', deflateSync(Buffer.alloc(64 * 1024)), 1024)).rejects.toMatchObject({ code: 'ERR_BUFFER_TOO_LARGE' });
    // The bound itself is allowed.
    await expect(inflateMessage('gzip', gzipSync(Buffer.alloc(1024)), 1024)).resolves.toHaveLength(1024);
    await expect(inflateMessage('gzip', Buffer.from('not gzip'), 1024)).rejects.toBeInstanceOf(Error);
    await expect(inflateMessage('deflate', gzipSync(message), 1024)).rejects.toBeInstanceOf(Error);
  });

  it('does not inflate on the event loop: the call returns before the work is done', async () => {
    // 32 KB of gzip that inflates past a 16 MiB bound: what inflating it on the event loop costs
    // (the idle control, measured here) against how long the call holds the loop. The least of
    // 5 runs each, so that a run the busy machine preempts does not count; the ratio is generous.
    const bomb = gzipSync(Buffer.alloc(32 * MIB));
    let inline = Infinity;
    let held = Infinity;
    for (let i = 0; i < 5; i++) {
      let t = performance.now();
      expect(() => gunzipSync(bomb, { maxOutputLength: 16 * MIB })).toThrow();
      inline = Math.min(inline, performance.now() - t);
      t = performance.now();
      const inflating = inflateMessage('gzip', bomb, 16 * MIB);
      held = Math.min(held, performance.now() - t);
      await expect(inflating).rejects.toMatchObject({ code: 'ERR_BUFFER_TOO_LARGE' });
    }
    expect(held * 4, `held ${held.toFixed(2)} ms, inline ${inline.toFixed(2)} ms`).toBeLessThan(inline);
  });
});

describe('MessageInflater', () => {
  it('inflates at most `concurrency` messages at a time, the others waiting their turn', async () => {
    // Each may hold up to the bound while it inflates: 64 gzip bombs at once on the thread pool
    // took 1.1 GB (16 MiB bound); two at a time hold at most twice the bound.
    const inflater = new MessageInflater(2);
    const bomb = gzipSync(Buffer.alloc(2 * MIB));
    const calls = Array.from({ length: 6 }, () => inflater.inflate('gzip', bomb, MIB, () => true));
    expect(inflater.running).toBe(2);
    expect(inflater.waiting).toBe(4);
    const settled = await Promise.allSettled(calls);
    for (const s of settled) expect(s).toMatchObject({ status: 'rejected', reason: { code: 'ERR_BUFFER_TOO_LARGE' } });
    expect(inflater.running).toBe(0);
    expect(inflater.waiting).toBe(0);
    await expect(inflater.inflate('gzip', gzipSync(Buffer.from('ok')), MIB, () => true)).resolves.toEqual(Buffer.from('ok'));
  });

  it('skips a message no longer wanted when its turn comes (its call answered or reset meanwhile)', async () => {
    const inflater = new MessageInflater(1);
    const first = inflater.inflate('gzip', gzipSync(Buffer.from('first')), MIB, () => true);
    let wanted = true;
    const second = inflater.inflate('gzip', gzipSync(Buffer.from('second')), MIB, () => wanted);
    wanted = false;
    await expect(first).resolves.toEqual(Buffer.from('first'));
    await expect(second).resolves.toBeUndefined();
    expect(inflater.running).toBe(0);
  });
});
