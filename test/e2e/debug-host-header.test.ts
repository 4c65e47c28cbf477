// Issue 18, finding 14: the debug port answers only the Host names an operator uses to reach
// it (localhost, a loopback address, DEBUG_HOST), so a DNS-rebinding page in an operator's
// browser during `kubectl port-forward` cannot read /, /debug/state, /rlconfig or /policy.
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/test-app';

const RULES = {
  'd.yaml': `
domain: d
descriptors:
  - key: k
    rate_limit: { unit: hour, requests_per_unit: 5 }
`,
};

/** A GET to the debug port with exactly this Host header (fetch would not send a foreign one). */
function getWithHost(port: number, path: string, host: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, method: 'GET', headers: { host }, timeout: 5000 }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end();
  });
}

const PATHS = ['/', '/debug/state', '/rlconfig', '/policy?domain=d&client=c', '/metrics'];
/** What each path answers an allowed Host (domain d has no policy: /policy says so with 404). */
const ANSWER: Record<string, number> = { '/policy?domain=d&client=c': 404 };

describe('debug port Host check (issue 18, finding 14)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp(RULES, { DEBUG_HOST: '127.0.0.1' });
  });
  afterAll(() => t.stop());

  test.each(PATHS)('%s: a foreign Host gets 403 and no content', async (path) => {
    for (const host of [
      'attacker.example',
      `attacker.example:${t.app.debugPort}`,
      '10.0.0.7',
      'localhost.attacker.example',
      '127.0.0.1.nip.io',
    ]) {
      const res = await getWithHost(t.app.debugPort, path, host);
      expect({ host, status: res.status }).toEqual({ host, status: 403 });
      expect(res.body).not.toContain('d.k');
      expect(res.body.length).toBeLessThan(200);
    }
  });

  test.each(PATHS)('%s: localhost, loopback addresses and DEBUG_HOST are answered, with or without port', async (path) => {
    const port = t.app.debugPort;
    for (const host of [
      'localhost',
      `localhost:${port}`,
      'LOCALHOST',
      '127.0.0.1',
      `127.0.0.1:${port}`,
      '127.5.6.7',
      '[::1]',
      `[::1]:${port}`,
    ]) {
      const res = await getWithHost(port, path, host);
      expect({ host, status: res.status }).toEqual({ host, status: ANSWER[path] ?? 200 });
    }
  });

  test('DEBUG_HOST set to a name: that name is answered too', async () => {
    const named = await startTestApp(RULES, { DEBUG_HOST: 'localhost' });
    try {
      // localhost itself, and not other names.
      expect((await getWithHost(named.app.debugPort, '/rlconfig', `localhost:${named.app.debugPort}`)).status).toBe(200);
      expect((await getWithHost(named.app.debugPort, '/rlconfig', 'evil.example')).status).toBe(403);
    } finally {
      await named.stop();
    }
  });
});
