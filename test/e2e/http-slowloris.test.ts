// Issue 26, finding 7: 1,024 slow connections filled the HTTP port's slots (HTTP_MAX_CONNECTIONS)
// and /healthcheck then got 36 connection resets and 7 answers of 200 (idle: 11 of 11). Now a
// peer at its share (HTTP_MAX_CONNECTIONS_PER_PEER), or a full port, closes the connection waiting
// longest without a whole request (the peer's own, or the largest peer's), so a fresh client is
// answered. Real slow sockets on loopback
// against the built server with its default HTTP bounds; the idle control runs in the same test.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { spawnServer, type ServerProcess } from '../helpers/server-process';
import { healthProbes, slowloris } from '../helpers/slowloris';

const RULES = { 't.yaml': 'domain: t\ndescriptors:\n  - key: k\n    rate_limit: { unit: hour, requests_per_unit: 1000 }\n' };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('HTTP port under slowloris (default HTTP bounds)', () => {
  let server: ServerProcess;
  beforeAll(async () => {
    server = await spawnServer(RULES, {});
  });
  afterAll(() => server?.cleanup());

  test('1,024 slow connections from the probe’s own address: every fresh /healthcheck is answered 200', async () => {
    const idle = await healthProbes(server.httpPort, 10);
    const attack = slowloris(server.httpPort, 1024, '127.0.0.1');
    try {
      // Every slot taken (bounded wait), then probe while the attacker re-opens what is closed.
      for (let i = 0; i < 100 && attack.open < 1024; i++) await sleep(100);
      await sleep(1000);
      const during = await healthProbes(server.httpPort, 15);
      console.log(
        `slowloris, 1,024 slow connections from 127.0.0.1: /healthcheck during ${JSON.stringify(during)}, idle control ${JSON.stringify(idle)}; ` +
          `${attack.closedByServer} slow connections closed by the server`,
      );
      expect(idle).toEqual({ 200: 10 });
      expect(during).toEqual({ 200: 15 });
    } finally {
      attack.stop();
    }
  }, 60_000);

  test('one peer holds at most HTTP_MAX_CONNECTIONS_PER_PEER (512); another peer is answered', async () => {
    const idle = await healthProbes(server.httpPort, 5);
    const attack = slowloris(server.httpPort, 1024, '127.0.0.2');
    try {
      // 1,024 opened from 127.0.0.2: the server keeps 512 of them at a time, closing its oldest.
      for (let i = 0; i < 100 && attack.closedByServer < 1024 - 512; i++) await sleep(100);
      const during = await healthProbes(server.httpPort, 10);
      console.log(
        `slowloris from 127.0.0.2: ${attack.closedByServer} of its connections closed by the server; /healthcheck from 127.0.0.1 ${JSON.stringify(during)}, idle ${JSON.stringify(idle)}`,
      );
      expect(attack.closedByServer).toBeGreaterThanOrEqual(1024 - 512);
      expect(during).toEqual({ 200: 10 });
    } finally {
      attack.stop();
    }
  }, 60_000);
});
