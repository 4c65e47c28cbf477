import { readdirSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { compileRules } from '../../../src/config/compile-rules';
import { parseRuleFile, type DomainConfig } from '../../../src/config/parse-rule-file';
import { ConfigError } from '../../../src/base/errors';

const FIXTURES = join(__dirname, '../../fixtures/config');

function load(relativePath: string): DomainConfig {
  const path = join(FIXTURES, relativePath);
  return parseRuleFile(basename(path), readFileSync(path, 'utf8'));
}

/** Loads the files in order as one rule set and returns the ConfigError's message. */
function errorOf(files: readonly string[], mergeDomainConfig = false): string {
  try {
    compileRules(files.map(load), { mergeDomainConfig });
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).code).toBe('CONFIG');
    return (err as Error).message;
  }
  throw new Error(`expected ${files.join(', ')} to be rejected`);
}

// One fixture per problem; the message is the reference's, verbatim, after `<file>: `.
const CASES: readonly (readonly [string, string])[] = [
  // YAML syntax and types
  ['bad_yaml', 'error loading config file: yaml: line 3: Flow sequence in block collection must be sufficiently indented and end with a ]'],
  ['duplicate_yaml_key', 'error loading config file: yaml: line 2: Map keys must be unique'],
  ['root_is_list', 'error loading config file: yaml: unmarshal errors:\n  line 1: cannot unmarshal !!seq into map[interface {}]interface {}'],
  ['requests_per_unit_not_integer', 'error loading config file: yaml: unmarshal errors:\n  line 6: cannot unmarshal !!str `abc` into uint32'],
  ['requests_per_unit_negative', 'error loading config file: yaml: unmarshal errors:\n  line 6: cannot unmarshal !!int `-1` into uint32'],
  [
    'descriptors_not_list',
    'error loading config file: yaml: unmarshal errors:\n  line 2: cannot unmarshal !!str `key1` into []config.YamlDescriptor',
  ],
  ['bool_not_bool', 'error loading config file: yaml: unmarshal errors:\n  line 4: cannot unmarshal !!str `true` into bool'],
  // bounds (ours; the reference has none and stalls on these)
  ['too_many_aliases', 'error loading config file: yaml: more than 1000 aliases'],
  ['alias_bomb', 'error loading config file: yaml: document is too large or too deeply nested (check aliases)'],
  // The reference's generic pre-check rejects floats before any field is read.
  ['requests_per_unit_float', 'error checking config'],
  // keys
  ['misspelled_key', "config error, unknown key 'ratelimit'"],
  ['misspelled_key2', "config error, unknown key 'requestsperunit'"],
  ['extension_key_outside_rate_limit', "config error, unknown key 'algorithm'"],
  ['non_string_key', 'config error, key is not of type string: 0.25'],
  ['non_map_list', 'config error, yaml file contains list of type other than map: a'],
  // domain and descriptors
  ['empty_domain', 'config file cannot have empty domain'],
  ['missing_domain', 'config file cannot have empty domain'],
  ['empty_file', 'config file cannot have empty domain'],
  ['empty_key', 'descriptor has empty key'],
  ['duplicate_key', "duplicate descriptor composite key 'test-domain.key1_value1'"],
  ['duplicate_nested_key', "duplicate descriptor composite key 'mydomain.key1_value1.key2'"],
  // rate_limit
  ['unlimited_with_unit', 'should not specify rate limit unit when unlimited'],
  ['bad_limit_unit', "invalid rate limit unit 'foo'"],
  ['missing_limit_unit', "invalid rate limit unit ''"],
  ['replaces_empty', 'should not have an empty replaces entry'],
  ['replaces_self', 'replaces should not contain name of same descriptor'],
  ['share_threshold_without_wildcard', "share_threshold can only be used with wildcard values (containing '*'), but found key 'files_exact'"],
  // our extensions
  ['bad_algorithm', "invalid rate limit algorithm 'leaky_bucket'"],
  ['zero_unit_multiplier', "invalid rate limit unit_multiplier '0': must be a positive integer"],
  ['zero_burst', "invalid rate limit burst '0': must be a positive integer"],
  // bounds within which every algorithm counts exactly (README, Rules)
  [
    'sliding_log_over_bound',
    "rate limit 'test-domain.key1_value1': sliding_log allows at most 1000 requests_per_unit (one stored entry per admitted call), got 1001",
  ],
  [
    'token_bucket_over_bound',
    "rate limit 'test-domain.key1': token_bucket needs burst × window and requests_per_unit × window (300000000, 300000000 × 31536000000 ms) at most 2^52 to count exactly",
  ],
  [
    'gcra_burst_over_bound',
    "rate limit 'test-domain.key1.key2': gcra needs burst × window and requests_per_unit × window (60000000, 10 × 86400000 ms) at most 2^52 to count exactly",
  ],
  [
    'sliding_window_over_bound',
    "rate limit 'test-domain.key1': sliding_window needs requests_per_unit × window (2000000 × 2592000000 ms) at most 2^52 to count exactly",
  ],
  ['window_over_bound', "rate limit 'test-domain.key1': window of 6307200000000000 ms is over 2^52 ms"],
];

describe('rule file errors', () => {
  it.each(CASES)('%s', (name, message) => {
    expect(errorOf([`errors/${name}.yaml`])).toBe(`${name}.yaml: ${message}`);
  });

  it('rejects the same domain in two files without MERGE_DOMAIN_CONFIG, naming the second file', () => {
    expect(errorOf(['valid/basic_config.yaml', 'errors/duplicate_domain.yaml'])).toBe(
      "duplicate_domain.yaml: duplicate domain 'test-domain' in config file",
    );
  });

  it('rejects a descriptor that another merged file already defines', () => {
    expect(errorOf(['merge/merge_domain_key1.yaml', 'errors/merge_duplicate_key.yaml'], true)).toBe(
      "merge_duplicate_key.yaml: duplicate descriptor composite key 'test-domain.key1_value1'",
    );
  });

  it('merges one domain from several files with MERGE_DOMAIN_CONFIG', () => {
    const rules = compileRules([load('merge/merge_domain_key1.yaml'), load('merge/merge_domain_key2.yaml')], {
      mergeDomainConfig: true,
    });
    expect(rules.domainCount).toBe(1);
    expect(rules.match('test-domain', [{ key: 'key1', value: 'value1' }])?.rule?.requestsPerUnit).toBe(10);
    expect(rules.match('test-domain', [{ key: 'key2', value: 'value2' }])?.rule?.requestsPerUnit).toBe(20);
  });

  it('has a fixture for every case and a case for every fixture', () => {
    const fixtures = readdirSync(join(FIXTURES, 'errors'));
    const multiFile = ['duplicate_domain.yaml', 'merge_duplicate_key.yaml'];
    const expected = [...CASES.map(([name]) => `${name}.yaml`), ...multiFile].sort();
    expect([...fixtures].sort()).toEqual(expected);
  });

  it('reports the first problem in file order, as the reference walks the file', () => {
    const text = [
      'domain: d',
      'descriptors:',
      '  - key: a',
      '    rate_limit: {unit: fortnight}',
      '  - key: a',
      '    rate_limit: {unit: second}',
    ].join('\n');
    expect(() => parseRuleFile('order.yaml', text)).toThrow("order.yaml: invalid rate limit unit 'fortnight'");
  });

  it('rejects a file over 512 KiB before parsing it', () => {
    const text = 'domain: d\n#' + 'x'.repeat(512 * 1024);
    expect(() => parseRuleFile('huge.yaml', text)).toThrow(
      `huge.yaml: error loading config file: ${512 * 1024 + 11} bytes, more than the limit of 524288`,
    );
    // One byte less is parsed (and then fails only for what it says).
    expect(() => parseRuleFile('big.yaml', text.slice(0, -12))).not.toThrow();
  });

  it('lists every wrong type at once, like yaml.v2', () => {
    const text = ['domain: d', 'descriptors:', '  - key: a', '    shadow_mode: 1', '    rate_limit: {unit: second, requests_per_unit: x}'].join(
      '\n',
    );
    expect(() => parseRuleFile('types.yaml', text)).toThrow(
      'types.yaml: error loading config file: yaml: unmarshal errors:\n' +
        '  line 4: cannot unmarshal !!int `1` into bool\n' +
        '  line 5: cannot unmarshal !!str `x` into uint32',
    );
  });
});
