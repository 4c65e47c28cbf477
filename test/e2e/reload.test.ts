import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { within } from '../harness/wait';
import { oneDescriptor } from '../helpers/rls-client';
import { startTestApp, type TestApp } from '../helpers/test-app';

const STEADY = `
domain: steady
descriptors:
  - key: k
    rate_limit: { unit: hour, requests_per_unit: 1000000 }
`;
const limitFile = (n: number): string => `
domain: moving
descriptors:
  - key: k
    rate_limit: { unit: hour, requests_per_unit: ${n} }
`;

describe('rule reload while requests flow', () => {
  let t: TestApp;
  let flowing = true;
  let sent = 0;
  const failures: unknown[] = [];
  let flow: Promise<void>;

  beforeAll(async () => {
    t = await startTestApp({ 'steady.yaml': STEADY });
    // Requests flow during every step below; none may fail.
    flow = (async () => {
      const deadline = Date.now() + 60_000;
      while (flowing && Date.now() < deadline && sent < 20_000) {
        sent++;
        await t.client.shouldRateLimit(oneDescriptor('steady', { k: 'v' })).catch((e: unknown) => failures.push(e));
        await t.client
          .shouldRateLimit(oneDescriptor('moving', { k: 'v' }, { hits_addend: { value: 0 } }))
          .catch((e: unknown) => failures.push(e));
      }
    })();
  });
  afterAll(async () => {
    flowing = false;
    await flow;
    await t.stop();
  });

  const movingLimit = async (): Promise<number | undefined> => {
    const res = await t.client.shouldRateLimit(oneDescriptor('moving', { k: 'v' }, { hits_addend: { value: 0 } }));
    return res.statuses[0]!.current_limit?.requests_per_unit;
  };
  const loadErrors = async (): Promise<number> => {
    const text = await t.app.metrics.registry.getSingleMetricAsString('ratelimit_service_config_load_error');
    return Number(/ratelimit_service_config_load_error (\d+)/.exec(text)?.[1] ?? 'NaN');
  };

  test('a file is added, changed, broken and fixed; each good change is in force soon (waited for up to 10 s)', async () => {
    expect(await movingLimit()).toBeUndefined();

    t.writeRule('moving.yaml', limitFile(3));
    await within(10_000, async () => (await movingLimit()) === 3);

    t.writeRule('moving.yaml', limitFile(7));
    await within(10_000, async () => (await movingLimit()) === 7);

    const errorsBefore = await loadErrors();
    t.writeRule('moving.yaml', 'domain: moving\ndescriptors:\n  - key: k\n    rate_limit: { unit: fortnight, requests_per_unit: 1 }\n');
    await within(10_000, async () => (await loadErrors()) > errorsBefore);
    // The broken load was rejected whole: the previous rules stay in force.
    expect(await movingLimit()).toBe(7);

    t.writeRule('moving.yaml', limitFile(9));
    await within(10_000, async () => (await movingLimit()) === 9);

    // Calls flowed beside the reloads (at least 10, however slow the machine), and none failed.
    await within(30_000, () => sent > 10, 'at least 10 calls beside the reloads');
    expect(failures).toEqual([]);
  });
});
