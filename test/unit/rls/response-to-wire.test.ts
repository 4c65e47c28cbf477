// The reference mapping the response encoder is checked against (test/helpers/response-to-wire.ts)
// must itself be right, or the round-trip test in test/integration/rls-codec.test.ts would compare
// against the wrong answer.
import { describe, expect, it } from 'vitest';
import type { RateLimitResponse } from '../../../src/service/types';
import { responseToWire, structToWire } from '../../helpers/response-to-wire';

const BASE: RateLimitResponse = { overallCode: 'OK', statuses: [], responseHeadersToAdd: [], requestHeadersToAdd: [] };

describe('responseToWire', () => {
  it('writes current_limit and duration_until_reset only for a status with a limit', () => {
    const wire = responseToWire({
      ...BASE,
      overallCode: 'OVER_LIMIT',
      statuses: [
        { code: 'OK', limitRemaining: 0, durationUntilResetSeconds: 0 },
        {
          code: 'OVER_LIMIT',
          currentLimit: { name: 'per-user', requestsPerUnit: 10, unit: 'WEEK' },
          limitRemaining: 0,
          durationUntilResetSeconds: 17,
        },
        { code: 'OK', currentLimit: { requestsPerUnit: 5, unit: 'MINUTE' }, limitRemaining: 4, durationUntilResetSeconds: 1 },
        { code: 'OK', limitRemaining: 4294967295, durationUntilResetSeconds: 0 },
      ],
    });
    expect(wire.overall_code).toBe('OVER_LIMIT');
    expect(wire.statuses).toEqual([
      { code: 'OK', limit_remaining: 0 },
      {
        code: 'OVER_LIMIT',
        current_limit: { name: 'per-user', requests_per_unit: 10, unit: 'WEEK' },
        limit_remaining: 0,
        duration_until_reset: { seconds: 17, nanos: 0 },
      },
      {
        code: 'OK',
        current_limit: { name: '', requests_per_unit: 5, unit: 'MINUTE' },
        limit_remaining: 4,
        duration_until_reset: { seconds: 1, nanos: 0 },
      },
      { code: 'OK', limit_remaining: 4294967295 },
    ]);
    expect(wire.statuses[0]).not.toHaveProperty('current_limit');
    expect(wire.statuses[0]).not.toHaveProperty('duration_until_reset');
  });

  it('passes headers through and leaves dynamic_metadata out when there is none', () => {
    const wire = responseToWire({
      ...BASE,
      responseHeadersToAdd: [{ key: 'RateLimit-Limit', value: '5' }],
      requestHeadersToAdd: [{ key: 'x-rl', value: '1' }],
    });
    expect(wire.response_headers_to_add).toEqual([{ key: 'RateLimit-Limit', value: '5' }]);
    expect(wire.request_headers_to_add).toEqual([{ key: 'x-rl', value: '1' }]);
    expect(wire).not.toHaveProperty('dynamic_metadata');
  });

  it('writes dynamic metadata as a Struct in camelCase oneof form', () => {
    const wire = responseToWire({
      ...BASE,
      dynamicMetadata: {
        domain: 'd',
        hitsAddend: 3,
        shadow: false,
        nothing: null,
        descriptors: [{ entries: ['k=v'] }],
        metadata: { team: 'a', weights: [1, 'x', true] },
      },
    });
    expect(wire.dynamic_metadata).toEqual({
      fields: {
        domain: { stringValue: 'd' },
        hitsAddend: { numberValue: 3 },
        shadow: { boolValue: false },
        nothing: { nullValue: 'NULL_VALUE' },
        descriptors: {
          listValue: { values: [{ structValue: { fields: { entries: { listValue: { values: [{ stringValue: 'k=v' }] } } } } }] },
        },
        metadata: {
          structValue: {
            fields: {
              team: { stringValue: 'a' },
              weights: { listValue: { values: [{ numberValue: 1 }, { stringValue: 'x' }, { boolValue: true }] } },
            },
          },
        },
      },
    });
  });

  it('never writes snake_case Value keys (proto-loader would drop them)', () => {
    const text = JSON.stringify(structToWire({ a: 'x', b: 1, c: true, d: null, e: {}, f: [] }));
    expect(text).not.toMatch(/string_value|number_value|bool_value|null_value|struct_value|list_value/);
  });
});
