import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/test-app';

const RULES = `
domain: web
descriptors:
  - key: path
    value: /login
    rate_limit:
      unit: minute
      requests_per_unit: 1
`;

async function postJson(url: string, body: string): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(url, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

describe('HTTP /json and /healthcheck', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ 'web.yaml': RULES });
  });
  afterAll(async () => {
    await t.stop();
  });

  test('/json answers 200, then 429 with the same body shape', async () => {
    const body = JSON.stringify({ domain: 'web', descriptors: [{ entries: [{ key: 'path', value: '/login' }] }] });
    const first = await postJson(`${t.httpUrl}/json`, body);
    expect(first.status).toBe(200);
    expect(first.json.overallCode).toBe('OK');
    expect(first.json.statuses).toEqual([{ code: 'OK', currentLimit: { requestsPerUnit: 1, unit: 'MINUTE' }, durationUntilReset: expect.stringMatching(/^\d+s$/) }]);
    const second = await postJson(`${t.httpUrl}/json`, body);
    expect(second.status).toBe(429);
    expect(second.json.overallCode).toBe('OVER_LIMIT');
    expect((second.json.statuses as { code: string }[])[0]!.code).toBe('OVER_LIMIT');
  });

  test.each([
    ['a body that is not JSON', '{"domain": '],
    ['descriptors that are not a list', '{"domain":"web","descriptors":{}}'],
    ['an empty domain', '{"domain":"","descriptors":[{"entries":[{"key":"a","value":"b"}]}]}'],
    ['no descriptors', '{"domain":"web","descriptors":[]}'],
    ['an override with a bad unit', '{"domain":"web","descriptors":[{"entries":[{"key":"a","value":"b"}],"limit":{"requestsPerUnit":1,"unit":"FORTNIGHT"}}]}'],
  ])('/json answers 400 for %s', async (_name, body) => {
    const res = await postJson(`${t.httpUrl}/json`, body);
    expect(res.status).toBe(400);
    expect(typeof res.json.error).toBe('string');
  });

  test('/healthcheck says OK', async () => {
    const res = await fetch(`${t.httpUrl}/healthcheck`);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('OK');
  });

  test('debug /rlconfig lists rules in the reference format', async () => {
    const res = await fetch(`${t.debugUrl}/rlconfig`);
    expect(await res.text()).toBe('web.path_/login: unit=MINUTE requests_per_unit=1, shadow_mode: false, quota_mode: false\n');
  });
});
