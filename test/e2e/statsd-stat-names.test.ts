// Issue 18, finding 6: request text in a stat name (a detailed_metric value, an unknown domain)
// must not start a new statsd line. The reference is the judge of every other character: its
// names for the same requests were recorded from the reference binary (see the fixture's note),
// and floodgate sends the same names, except that control characters (newline first) become `_`:
// the reference keeps them, so a value with `\n` forges a line there (the fixture shows it).
import { createSocket, type Socket } from 'node:dgram';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { projectRoot } from '../../src/base/paths';
import { waitUntil } from '../harness/wait';
import { startTestApp, type TestApp } from '../helpers/test-app';

interface Fixture {
  readonly requests: readonly { readonly domain: string; readonly value: string }[];
  readonly stats: readonly string[];
  readonly datagram: string;
}
const FIXTURE = JSON.parse(readFileSync(join(projectRoot, 'test/fixtures/statsd-reference/nasty-stat-names.json'), 'utf8')) as Fixture;

const RULES = {
  'shop.yaml': `domain: shop
descriptors:
  - key: detailed
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 100}
`,
};

let app: TestApp;
let udp: Socket;
let received = '';
beforeAll(async () => {
  udp = createSocket('udp4');
  udp.on('message', (m: Buffer) => (received += m.toString()));
  await new Promise<void>((resolve) => udp.bind(0, '127.0.0.1', resolve));
  app = await startTestApp(RULES, {
    USE_STATSD: 'true',
    STATSD_HOST: '127.0.0.1',
    STATSD_PORT: String(udp.address().port),
    STATSD_PROTOCOL: 'udp',
    STATS_FLUSH_INTERVAL: '100ms',
  });
});
afterAll(async () => {
  await app?.stop();
  udp?.close();
});

test("the reference's stat names for nasty values, with control characters made `_`: no request forges a line", async () => {
  // The reference forges lines: its datagram has lines that no request's stat is.
  expect(FIXTURE.datagram.split('\n')).toContain('ratelimit.service.rate_limit.billing.checkout.total_hits:1|c');
  for (const r of FIXTURE.requests) {
    const body = JSON.stringify({ domain: r.domain, descriptors: [{ entries: [{ key: 'detailed', value: r.value }] }] });
    const res = await fetch(`${app.httpUrl}/json`, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
    expect(res.status).toBe(200);
  }
  // eslint-disable-next-line no-control-regex
  const expected = FIXTURE.stats.map((name) => name.replace(/[\u0000-\u001f\u007f]/g, '_') + ':1|c');
  const lines = await waitUntil(
    'the stats of every request',
    () => {
      const l = received.split('\n');
      return expected.every((e) => l.includes(e)) ? l : undefined;
    },
    { timeoutMs: 20_000, diagnostics: () => `missing: ${JSON.stringify(expected.filter((e) => !received.split('\n').includes(e)))}` },
  );
  // Names without a control character are the reference's, byte for byte.
  for (const name of FIXTURE.stats) {
    // eslint-disable-next-line no-control-regex
    if (!/[\u0000-\u001f\u007f]/.test(name)) expect(lines).toContain(`${name}:1|c`);
  }
  const forged = lines.filter((l) => /^ratelimit\.service\.rate_limit\.(billing|forged)\b/.test(l));
  console.log(`stat lines for ${FIXTURE.requests.length} nasty requests: ${forged.length} forged (the reference: 3)`);
  expect(forged).toEqual([]);
  // Every line is one stat: a name, a value, a type.
  for (const l of lines.filter((x) => x !== '')) expect(l).toMatch(/^[^\n:|]+:\d+\|(c|g|ms)(\|@[\d.]+)?$/);
});
