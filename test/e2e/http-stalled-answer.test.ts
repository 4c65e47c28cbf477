// Review of issue 26, finding 7: a connection whose request arrived whole is "busy" and never
// evicted; a client that asks for a large answer and never reads it kept its slot forever, so a
// full port refused every fresh client. Now an answer must be written out within
// HTTP_REQUEST_TIMEOUT of being produced, else its connection is closed. Real raw sockets on
// loopback against the built server (debug port: /rlconfig is the large answer there; the slots
// and the deadline are the same code on every HTTP port). Nothing here is timed: the test waits
// (bounded) for the stalled answers to be produced and for a fresh client to be answered.
import * as http from 'node:http';
import * as net from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { spawnServer, type ServerProcess } from '../helpers/server-process';

// One parent with a 10,000-character value and 1,000 children: /rlconfig prints the parent's
// path on each child's line, about 10 MB, more than loopback's socket buffers hold (4 MiB send,
// 128 KiB receive by default), so an answer to a client that never reads stays unwritten.
const children = Array.from({ length: 1000 }, (_, i) => `      - key: c${i}\n        rate_limit: { unit: hour, requests_per_unit: 1 }\n`).join(
  '',
);
const RULES = { 't.yaml': `domain: t\ndescriptors:\n  - key: k\n    value: "${'v'.repeat(10_000)}"\n    descriptors:\n${children}` };
const SLOTS = 4;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A raw socket asking for /rlconfig that stops reading at the answer's first bytes. `cut` (after
 * `resume`) tells whether the server closed it before the whole answer was read.
 */
function stalledReader(port: number) {
  const socket = net.connect({ host: '127.0.0.1', port, localAddress: '127.0.0.2' });
  socket.on('error', () => {});
  // One write: the request arrives whole, so its connection is busy from then on.
  socket.write('GET /rlconfig HTTP/1.1\r\nHost: localhost\r\n\r\n');
  let received = 0;
  let expected = Infinity;
  const answering = new Promise<void>((resolve) =>
    socket.once('data', (first: Buffer) => {
      socket.pause();
      const head = first.toString('latin1');
      const length = /content-length: (\d+)/i.exec(head)?.[1];
      if (length !== undefined) expected = head.indexOf('\r\n\r\n') + 4 + Number(length);
      resolve();
    }),
  );
  socket.on('data', (chunk: Buffer) => (received += chunk.length));
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  return {
    socket,
    answering,
    /** Reads what the kernel holds; true once closed short of the whole answer. */
    async cut(): Promise<boolean> {
      socket.resume();
      await Promise.race([closed, sleep(10_000)]);
      return socket.destroyed && received < expected;
    },
  };
}

/** One fresh GET of the debug page: its status, or the error's code. */
function probe(port: number): Promise<string> {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/', agent: false, timeout: 5000, headers: { host: 'localhost' } }, (res) => {
      res.resume();
      res.on('end', () => resolve(String(res.statusCode)));
    });
    req.on('timeout', () => req.destroy(Object.assign(new Error('timeout'), { code: 'TIMEOUT' })));
    req.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
  });
}

describe('HTTP port full of clients that never read their answers', () => {
  let server: ServerProcess;
  beforeAll(async () => {
    server = await spawnServer(RULES, {
      HTTP_MAX_CONNECTIONS: String(SLOTS),
      HTTP_MAX_CONNECTIONS_PER_PEER: String(SLOTS),
      HTTP_REQUEST_TIMEOUT: '2s',
      HTTP_HEADERS_TIMEOUT: '2s',
    });
  }, 60_000);
  afterAll(() => server?.cleanup());

  test('the stalled connections are closed and a fresh client is answered', async () => {
    const idle = await probe(server.debugPort);
    const readers = Array.from({ length: SLOTS }, () => stalledReader(server.debugPort));
    try {
      // Every slot holds a produced answer its client does not read: the port is full.
      await Promise.all(readers.map((r) => r.answering));
      // Before: every fresh client was refused for as long as the readers stayed (forever).
      // Bounded: 30 tries, each after a 1 s pause, against a 2 s deadline.
      const tries: string[] = [];
      for (let i = 0; i < 30 && tries.at(-1) !== '200'; i++) {
        tries.push(await probe(server.debugPort));
        if (tries.at(-1) !== '200') await sleep(1000);
      }
      const cut = await Promise.all(readers.map((r) => r.cut()));
      console.log(
        `${SLOTS} stalled /rlconfig readers filling the port: fresh probes ${JSON.stringify(tries)}; idle control ${idle}; readers closed short of their answer: ${JSON.stringify(cut)}`,
      );
      expect(idle).toBe('200');
      expect(tries.at(-1)).toBe('200');
      expect(cut).toEqual(readers.map(() => true));
    } finally {
      for (const r of readers) r.socket.destroy();
    }
  }, 90_000);
});
