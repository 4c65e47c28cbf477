// Start-up without good rules (FORCE_START_WITHOUT_INITIAL_CONFIG, HEALTHY_WITH_AT_LEAST_ONE_
// CONFIG_LOADED), a refused start, and dynamic metadata as it really travels on the wire.
import { status as GrpcStatus } from '@grpc/grpc-js';
import { afterEach, describe, expect, test } from 'vitest';
import { within } from '../harness/wait';
import { oneDescriptor } from '../helpers/rls-client';
import { spawnServer } from '../helpers/server-process';
import { startTestApp, type TestApp } from '../helpers/test-app';

const GOOD = `
domain: s
descriptors:
  - key: k
    quota_mode: true
    metadata: { team: payments, tier: 2 }
    rate_limit: { unit: hour, requests_per_unit: 1 }
`;
const BROKEN = 'domain: s\ndescriptors:\n  - key: k\n    rate_limit: { unit: fortnight, requests_per_unit: 1 }\n';

describe('start-up without good rules', () => {
  let t: TestApp | undefined;
  afterEach(async () => {
    await t?.stop();
    t = undefined;
  });

  test('a broken rule file stops start-up with the reference message', async () => {
    await expect(spawnServer({ 'bad.yaml': BROKEN }, {})).rejects.toThrow("bad.yaml: invalid rate limit unit 'fortnight'");
  });

  test('FORCE_START: serves, answers UNAVAILABLE until rules load, NOT_SERVING when asked to be', async () => {
    t = await startTestApp(
      { 's.yaml': BROKEN },
      { FORCE_START_WITHOUT_INITIAL_CONFIG: 'true', HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED: 'true' },
    );
    await expect(t.client.shouldRateLimit(oneDescriptor('s', { k: 'v' }))).rejects.toMatchObject({
      code: GrpcStatus.UNAVAILABLE,
      details: 'no rate limit configuration loaded',
    });
    expect(await t.client.healthCheck('ratelimit')).toBe('NOT_SERVING');
    expect((await fetch(`${t.httpUrl}/healthcheck`)).status).toBe(500);

    t.writeRule('s.yaml', GOOD);
    await within(10_000, async () => (await t!.client.healthCheck('ratelimit')) === 'SERVING');
    const res = await t.client.shouldRateLimit(oneDescriptor('s', { k: 'v' }));
    expect(res.statuses[0]!.current_limit?.requests_per_unit).toBe(1);
  });

  test('without HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED it is SERVING before rules load', async () => {
    t = await startTestApp({ 's.yaml': BROKEN }, { FORCE_START_WITHOUT_INITIAL_CONFIG: 'true' });
    expect(await t.client.healthCheck('ratelimit')).toBe('SERVING');
  });
});

describe('RESPONSE_DYNAMIC_METADATA on the wire', () => {
  let t: TestApp | undefined;
  afterEach(async () => {
    await t?.stop();
  });

  test('arrives as a google.protobuf.Struct with every field', async () => {
    t = await startTestApp({ 's.yaml': GOOD }, { RESPONSE_DYNAMIC_METADATA: 'true' });
    const res = await t.client.shouldRateLimit({ ...oneDescriptor('s', { k: 'v' }), hits_addend: 1 });
    // proto-loader drops Struct values written with snake_case oneof names; these arrived.
    const fields = (res.dynamic_metadata as unknown as { fields: Record<string, Record<string, unknown>> }).fields;
    expect(fields.domain).toMatchObject({ stringValue: 's' });
    expect(fields.hitsAddend).toMatchObject({ numberValue: 1 });
    const descriptors = fields.descriptors as {
      listValue: { values: { structValue: { fields: { entries: { listValue: { values: { stringValue: string }[] } } } } }[] };
    };
    expect(descriptors.listValue.values[0]!.structValue.fields.entries.listValue.values[0]!.stringValue).toBe('k=v');
    const metadata = fields.metadata as { structValue: { fields: Record<string, Record<string, unknown>> } };
    expect(metadata.structValue.fields.team).toMatchObject({ stringValue: 'payments' });
    expect(metadata.structValue.fields.tier).toMatchObject({ numberValue: 2 });
    // The reference no longer sends failed_descriptors.
    expect(Object.keys(fields).sort()).toEqual(['descriptors', 'domain', 'hitsAddend', 'metadata']);
  });
});
