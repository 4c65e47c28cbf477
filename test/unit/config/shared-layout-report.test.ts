// REDIS_KEY_LAYOUT=reference (issue 30): which rules the reference can express (they count in its
// keys) and the one line said when rules load about the others.
import { describe, expect, it } from 'vitest';
import { compileRules } from '../../../src/config/compile-rules';
import { parseRuleFile } from '../../../src/config/parse-rule-file';
import { ownKeyReason, sharedLayoutReport } from '../../../src/config/shared-layout-report';
import { planRequest } from '../../../src/service/descriptor-plan';
import type { LimitSpec } from '../../../src/domain/limit-spec';

const RULES = `
domain: d
descriptors:
  - key: plain
    rate_limit: { unit: minute, requests_per_unit: 5 }
  - key: wild
    value: "a*"
    share_threshold: true
    rate_limit: { unit: hour, requests_per_unit: 5 }
  - key: multi
    rate_limit: { unit: minute, unit_multiplier: 5, requests_per_unit: 5 }
  - key: bucket
    rate_limit: { unit: second, requests_per_unit: 5, algorithm: token_bucket }
  - key: list
    rate_limits:
      - { unit: second, requests_per_unit: 5 }
      - { unit: hour, requests_per_unit: 50 }
  - key: free
    rate_limit: { unlimited: true }
`;

const rules = compileRules([parseRuleFile('d.yaml', RULES)], { mergeDomainConfig: false });

describe('the rules the reference can express (LimitSpec.shareable)', () => {
  it('a fixed window of one unit outside a list, and a per-request override; nothing else', () => {
    const specs = (key: string, limit?: { requests_per_unit: number; unit: 'HOUR' }): LimitSpec[] =>
      planRequest(rules, {
        domain: 'd',
        hitsAddend: 1,
        descriptors: [
          { entries: [{ key, value: 'ab' }], ...(limit && { limit: { requestsPerUnit: limit.requests_per_unit, unit: limit.unit } }) },
        ],
      }).checks.map((c) => c.spec);
    const shareable = (key: string, limit?: { requests_per_unit: number; unit: 'HOUR' }): (boolean | undefined)[] =>
      specs(key, limit).map((s) => s.shareable);
    expect(shareable('plain')).toEqual([true]);
    expect(shareable('wild')).toEqual([true]);
    expect(shareable('multi')).toEqual([false]);
    expect(shareable('bucket')).toEqual([false]);
    expect(shareable('list')).toEqual([false, false]);
    expect(shareable('other', { requests_per_unit: 3, unit: 'HOUR' })).toEqual([true]);
    // One object shape for every spec the plan builds, shareable or not (one hidden class for the
    // layers that read them on every request).
    const shapes = new Set(['plain', 'multi', 'bucket', 'list'].flatMap((k) => specs(k).map((s) => Object.keys(s).join(','))));
    shapes.add(Object.keys(specs('other', { requests_per_unit: 3, unit: 'HOUR' })[0]!).join(','));
    expect([...shapes]).toEqual(['algorithm,limit,windowSeconds,burst,shareable']);
  });

  it('says why each other rule keeps floodgate’s keys', () => {
    const reasons = rules.rules.map((r) => [r.fullKey, ownKeyReason(r)]);
    expect(reasons).toEqual([
      ['d.plain', undefined],
      ['d.wild_a*', undefined],
      ['d.multi', 'unit_multiplier'],
      ['d.bucket', 'algorithm token_bucket'],
      ['d.list', 'a rate_limits list'],
      ['d.list', 'a rate_limits list'],
      ['d.free', undefined],
    ]);
  });

  it('one line when rules load: how many keep floodgate’s keys, a few named with the reason', () => {
    expect(sharedLayoutReport(rules)).toBe(
      "REDIS_KEY_LAYOUT=reference: 4 of 6 rules count in floodgate's own keys, not the reference's (it cannot express them; " +
        'pods of both do not count them together): d.multi: unit_multiplier; d.bucket: algorithm token_bucket; d.list (second): a rate_limits list, and 1 more',
    );
    const only = compileRules(
      [parseRuleFile('e.yaml', 'domain: e\ndescriptors:\n  - key: k\n    rate_limit: { unit: day, requests_per_unit: 1 }\n')],
      {
        mergeDomainConfig: false,
      },
    );
    expect(sharedLayoutReport(only)).toBeUndefined();
  });
});
