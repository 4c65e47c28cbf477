import { describe, expect, test } from 'vitest';
import { referenceKeyStem, referenceWindowKey, referenceWindowStart } from '../../../src/limiter/reference-key';

// The shapes envoyproxy/ratelimit's src/limiter/cache_key.go writes (GenerateCacheKey).
describe("the reference's cache key", () => {
  const counter = {
    domain: 'edge',
    entries: [
      { key: 'remote_address', value: '10.0.0.1' },
      { key: 'path', value: '/a_b' },
    ],
  };
  test('prefix, domain, each entry key_value_, then the window start in seconds', () => {
    expect(referenceWindowKey('', counter, 3600, 7_205_999)).toBe('edge_remote_address_10.0.0.1_path_/a_b_7200');
    expect(referenceWindowKey('pfx:', counter, 60, 7_205_999)).toBe('pfx:edge_remote_address_10.0.0.1_path_/a_b_7200');
    expect(referenceWindowKey('', { domain: 'd', entries: [] }, 1, 1_500)).toBe('d_1');
  });
  test('the window start floors whole seconds to the unit, as (now/divider)*divider', () => {
    expect(referenceWindowStart(86_400, 86_400_000 * 3 + 5)).toBe(86_400 * 3);
    expect(referenceWindowStart(1, 999)).toBe(0);
    expect(referenceWindowStart(2_592_000, 2_592_000_000 + 1000)).toBe(2_592_000);
  });
  test('nothing escaped, no hash tag', () => {
    expect(referenceKeyStem('', { domain: 'd{x}', entries: [{ key: 'k:1', value: 'v=%' }] })).toBe('d{x}_k:1_v=%_');
  });
});
