import { readdirSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { compileRules } from '../../../src/config/compile-rules';
import { parseRuleFile, type DomainConfig } from '../../../src/config/parse-rule-file';
import { formatRuleConfig } from '../../../src/http/debug-routes';
import { ConfigError } from '../../../src/base/errors';

const FIXTURES = join(__dirname, '../../fixtures/config');

function load(relativePath: string): DomainConfig {
  const path = join(FIXTURES, relativePath);
  return parseRuleFile(basename(path), readFileSync(path, 'utf8'));
}

function errorOf(files: readonly string[], mergeDomainConfig = false): string {
  try {
    compileRules(files.map(load), { mergeDomainConfig });
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error(`expected ${files.join(', ')} to be rejected`);
}

// One fixture per problem, the exact message after `<file>: `.
const CASES: readonly (readonly [string, string])[] = [
  ['policy_unknown_key', "config error, unknown policy key 'windw_seconds'"],
  ['policy_unknown_weight', "config error, unknown policy key 'weights.scans'"],
  ['policy_inside_descriptor', "config error, unknown key 'policy'"],
  ['policy_not_a_map', 'error loading config file: yaml: unmarshal errors:\n  line 5: cannot unmarshal !!str `remote_...` into policy'],
  ['policy_limit_percent_float', 'error loading config file: yaml: unmarshal errors:\n  line 7: cannot unmarshal !!float `0.5` into uint32'],
  ['policy_without_client', 'policy needs a client: the descriptor key that identifies the client'],
  ['policy_thresholds_not_rising', 'invalid policy thresholds: need 1 <= elevated < suspicious < blocked, got 10, 10, 30'],
  ['policy_limit_percent_over_100', 'invalid policy limit_percent: need 100 >= elevated >= suspicious, got 150, 10'],
  ['policy_zero_quiet', "invalid policy quiet_seconds '0': must be a positive integer"],
  ['policy_route_is_client', "policy route 'remote_address' is the client key"],
];

describe('policy block errors', () => {
  it.each(CASES)('%s', (name, message) => {
    expect(errorOf([`policy-errors/${name}.yaml`])).toBe(`${name}.yaml: ${message}`);
  });

  it('has a fixture for every case and a case for every fixture', () => {
    expect(readdirSync(join(FIXTURES, 'policy-errors')).sort()).toEqual(CASES.map(([name]) => `${name}.yaml`).sort());
  });

  it('refuses a second policy for one domain across merged files', () => {
    expect(errorOf(['policy/api_policy.yaml', 'policy/api_second_policy.yaml'], true)).toBe(
      "api_second_policy.yaml: duplicate policy for domain 'api'",
    );
  });
});

describe('policy block', () => {
  it('is read with every field, and shown by /rlconfig', () => {
    const rules = compileRules([load('policy/api_policy.yaml')], { mergeDomainConfig: false });
    expect(rules.policy('api')).toEqual({
      domain: 'api',
      client: 'remote_address',
      route: 'path',
      fingerprint: 'request_hash',
      windowSeconds: 10,
      weights: { requests: 1, repeats: 3, routes: 3, denials: 5 },
      thresholds: { elevated: 10, suspicious: 20, blocked: 40 },
      limitPercent: { elevated: 50, suspicious: 10 },
      blockedSeconds: 60,
      quietSeconds: 30,
      shadowMode: false,
    });
    expect(formatRuleConfig(rules)).toBe(
      'api.remote_address: unit=MINUTE requests_per_unit=10, shadow_mode: false, quota_mode: false\n' +
        'api: policy client=remote_address route=path fingerprint=request_hash window_seconds=10' +
        ' weights=requests:1,repeats:3,routes:3,denials:5 thresholds=elevated:10,suspicious:20,blocked:40' +
        ' limit_percent=elevated:50,suspicious:10 blocked_seconds=60 quiet_seconds=30, shadow_mode: false\n',
    );
  });

  it('fills defaults and leaves files without a policy as they were', () => {
    const rules = compileRules([parseRuleFile('p.yaml', 'domain: p\npolicy: { client: api_key }\n'), load('valid/basic_config.yaml')], {
      mergeDomainConfig: false,
    });
    expect(rules.policy('p')).toMatchObject({ client: 'api_key', windowSeconds: 10, blockedSeconds: 300, quietSeconds: 60, shadowMode: false });
    expect(rules.policy('p')?.route).toBeUndefined();
    expect(rules.policy('test-domain')).toBeUndefined();
    expect(rules.policies.map((p) => p.domain)).toEqual(['p']);
  });
});
