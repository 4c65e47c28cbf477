// The debug page `/` in a real headless Chromium: it lists the loaded domains and rules, and a
// rule's live totals change after requests without reloading the page.
import { hostname } from 'node:os';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { startStandalone } from '../harness/redis-servers';
import { waitUntil } from '../harness/wait';
import { launchChromium, type Browser, type Page } from '../helpers/headless-chromium';
import { oneDescriptor } from '../helpers/rls-client';
import { startTestApp, type TestApp } from '../helpers/test-app';

const RULES = {
  'shop.yaml': `domain: shop
descriptors:
  - key: user
    rate_limit: { name: per_user, unit: hour, requests_per_unit: 3 }
  - key: tenant
    shadow_mode: true
    rate_limit: { unit: hour, requests_per_unit: 1 }
  - key: api_key
    detailed_metric: true
    rate_limit: { unit: hour, requests_per_unit: 2 }
`,
  'search.yaml': 'domain: search\ndescriptors:\n  - key: q\n    rate_limit: { unit: second, requests_per_unit: 9 }\n',
};

let app: TestApp;
let browser: Browser;
beforeAll(async () => {
  app = await startTestApp(RULES);
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  await app?.stop();
});

interface RuleRow {
  hits: string;
  over: string;
  near: string;
  shadow: string;
}

const READ_ROW = (rule: string) => `(() => {
  const tr = [...document.querySelectorAll('tr[data-rule]')].find((r) => r.dataset.rule === ${JSON.stringify(rule)});
  if (!tr) return null;
  const cell = (c) => tr.querySelector('td.' + c).textContent;
  return { hits: cell('hits'), over: cell('over'), near: cell('near'), shadow: cell('shadow') };
})()`;

test('the page lists domains and rules and its counts follow requests live', async () => {
  const page = await browser.open(`${app.debugUrl}/`);
  const first = await waitUntil('rule row shop.user', () => page.evaluate<RuleRow | null>(READ_ROW('shop.user')).then((r) => r ?? undefined), {
    timeoutMs: 20_000,
    intervalMs: 200,
  });
  expect(first).toEqual({ hits: '0', over: '0', near: '0', shadow: '0' });
  const headings = await page.evaluate<string[]>(`[...document.querySelectorAll('h2')].map((h) => h.textContent)`);
  expect(headings).toEqual(['Backend', 'domain search', 'domain shop']);
  expect(
    await page.evaluate<string>(
      `document.getElementById('backend-type').textContent + ' ' + document.getElementById('backend-health').textContent`,
    ),
  ).toBe('memory healthy');

  for (let i = 0; i < 5; i++) await app.client.shouldRateLimit(oneDescriptor('shop', { user: 'ann' }));
  for (let i = 0; i < 2; i++) await app.client.shouldRateLimit(oneDescriptor('shop', { tenant: 't' }));
  // No reload: the page's own refresh brings the new totals.
  const after = await waitUntil(
    'hits 5',
    () => page.evaluate<RuleRow | null>(READ_ROW('shop.user')).then((r) => (r?.hits === '5' ? r : undefined)),
    { timeoutMs: 20_000, intervalMs: 200 },
  );
  // 3 per hour: hits 1-2 within, 3 near (ratio 0.8), 4-5 over.
  expect(after).toEqual({ hits: '5', over: '2', near: '1', shadow: '0' });
  const tenant = await waitUntil(
    'tenant shadow',
    () => page.evaluate<RuleRow | null>(READ_ROW('shop.tenant')).then((r) => (r?.hits === '2' ? r : undefined)),
    { timeoutMs: 20_000, intervalMs: 200 },
  );
  expect(tenant.shadow).toBe('1');
});

// Issue 28: a detailed_metric rule counts under labels made of request values; the page showed
// 0 for it while it was limiting, no rates, and not which pod answered.
test('a detailed_metric rule shows its own hits, the rows show rates, and the page names its pod', async () => {
  const page = await browser.open(`${app.debugUrl}/`);
  const readRate = `(() => {
    const tr = [...document.querySelectorAll('tr[data-rule]')].find((r) => r.dataset.rule === 'shop.api_key');
    return tr ? [tr.querySelector('td.hits-rate').textContent, tr.querySelector('td.over-rate').textContent] : null;
  })()`;
  await waitUntil('rule row shop.api_key', () => page.evaluate<string[] | null>(readRate).then((r) => r ?? undefined), {
    timeoutMs: 20_000,
    intervalMs: 200,
  });
  for (let i = 0; i < 4; i++) await app.client.shouldRateLimit(oneDescriptor('shop', { api_key: `key-${i % 2}` }));
  // 2 per hour per key: two keys, each 2 within; then calls over the limit.
  for (let i = 0; i < 3; i++) await app.client.shouldRateLimit(oneDescriptor('shop', { api_key: 'key-0' }));
  const row = await waitUntil(
    'hits 7',
    () => page.evaluate<RuleRow | null>(READ_ROW('shop.api_key')).then((r) => (r?.hits === '7' ? r : undefined)),
    { timeoutMs: 20_000, intervalMs: 200 },
  );
  expect(row.over).toBe('3');
  // The refresh after the calls shows them as a rate (per second, over the refresh interval).
  const rates = await waitUntil(
    'a rate above 0',
    () => page.evaluate<string[] | null>(readRate).then((r) => (r !== null && Number.parseFloat(r[0]!) > 0 ? r : undefined)),
    { timeoutMs: 20_000, intervalMs: 100 },
  );
  expect(rates[0]).toMatch(/^\d+(\.\d+)?\/s$/);
  const instance = await page.evaluate<string>(`document.getElementById('instance').textContent`);
  expect(instance).toContain(hostname());
  expect(instance).toContain(`pid ${process.pid}`);
});

// Issue 19: a newcomer met a debug page that showed neither why a reload failed nor the policy.
test('the page shows the last reload error and each policy with its tiers and decisions', async () => {
  const policyApp = await startTestApp({
    'login.yaml': `domain: login
policy:
  client: remote_address
  window_seconds: 60
  weights: { requests: 1, repeats: 0, routes: 0, denials: 0 }
  thresholds: { elevated: 2, suspicious: 4, blocked: 6 }
  limit_percent: { elevated: 50, suspicious: 10 }
  blocked_seconds: 30
  quiet_seconds: 30
descriptors:
  - key: remote_address
    rate_limit: { unit: minute, requests_per_unit: 100 }
`,
  });
  const own = await launchChromium();
  try {
    for (let i = 0; i < 3; i++) await policyApp.client.shouldRateLimit(oneDescriptor('login', { remote_address: '10.0.0.9' }));
    policyApp.writeRule('broken.yaml', 'domain: broken\ndescriptors:\n  - key: k\n    rate_limit: { unit: fortnight, requests_per_unit: 1 }\n');
    const page = await own.open(`${policyApp.debugUrl}/`);
    const error = await waitUntil(
      'the reload error on the page',
      () =>
        page.evaluate<string>(`document.getElementById('last-load-error').textContent`).then((t) => (t.includes('fortnight') ? t : undefined)),
      { timeoutMs: 20_000, intervalMs: 200 },
    );
    expect(error).toMatch(/broken\.yaml: invalid rate limit unit 'fortnight'/);
    const row = await waitUntil(
      'the policy row',
      () =>
        page
          .evaluate<string[] | null>(
            `(() => { const tr = document.querySelector('tr[data-policy="login"]'); return tr && [...tr.children].map((c) => c.textContent); })()`,
          )
          .then((r) => r ?? undefined),
      { timeoutMs: 20_000, intervalMs: 200 },
    );
    // domain, client, thresholds, then the decisions per tier so far: 3 calls weighing 1 each,
    // the first normal, the second and third at score 2 and 3, elevated.
    expect(row).toEqual(['login', 'remote_address', 'elevated 2, suspicious 4, blocked 6', '1', '2', '0', '0']);
  } finally {
    // Its own browser, closed first: the page polls on a kept-alive connection, which would
    // hold the server's close.
    await own.close();
    await policyApp.stop();
  }
});

// Issue 30: which Redis key layout is in force, on the page and in /debug/state.
test("the page says which key layout is in force: the reference's (shared), floodgate's own, none in memory", async () => {
  const readLayout = `document.getElementById('key-layout')?.textContent ?? null`;
  const shownOn = (page: Page) =>
    waitUntil('key layout', () => page.evaluate<string | null>(readLayout).then((t) => t || undefined), { timeoutMs: 20_000, intervalMs: 200 });
  expect(await shownOn(await browser.open(`${app.debugUrl}/`))).toBe('none (memory backend)');
  const redis = await startStandalone();
  try {
    for (const [env, shown] of [
      [{ REDIS_KEY_LAYOUT: 'reference' }, "reference: the reference's own keys, shared with envoyproxy/ratelimit (REDIS_KEY_LAYOUT=reference)"],
      [
        {},
        "floodgate: its own keys, carrying the reference's counts over for windows longer than a minute begun within 15m of start (REDIS_KEY_LAYOUT_CARRY_OVER)",
      ],
      [{ REDIS_KEY_LAYOUT_CARRY_OVER: '0' }, 'floodgate: its own keys'],
      [
        { REDIS_KEY_LAYOUT: 'reference', REDIS_KEY_LAYOUT_UNTIL: '2030-01-01T03:00:00Z' },
        "reference: the reference's own keys, shared with envoyproxy/ratelimit (REDIS_KEY_LAYOUT=reference) until 2030-01-01T03:00:00.000Z, then floodgate's own keys, the windows longer than a minute in progress carried over (REDIS_KEY_LAYOUT_UNTIL)",
      ],
    ] as const) {
      const redisApp = await startTestApp(RULES, { BACKEND_TYPE: 'redis', REDIS_URL: redis.url, ...env });
      // Its own browser, closed before the server: the page polls on a kept-alive connection.
      const own = await launchChromium();
      try {
        const state = (await (await fetch(`${redisApp.debugUrl}/debug/state`)).json()) as { backend: { keyLayout: string } };
        expect(state.backend.keyLayout).toBe(shown);
        expect(await shownOn(await own.open(`${redisApp.debugUrl}/`))).toBe(shown);
      } finally {
        await own.close();
        await redisApp.stop();
      }
    }
  } finally {
    await redis.stop();
  }
});
