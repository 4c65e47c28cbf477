// A YAML syntax error cannot carry Go's yaml.v2 wording, but it keeps the reference's form
// `<file>: error loading config file: yaml: line N: <reason>` (the README lists the difference).
import { describe, expect, it } from 'vitest';
import { parseRuleFile } from '../../../src/config/parse-rule-file';
import { ConfigError } from '../../../src/base/errors';

function messageOf(name: string, text: string): string {
  try {
    parseRuleFile(name, text);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error(`expected ${name} to be rejected`);
}

describe('YAML syntax errors', () => {
  it("the reference's own bad_yaml.yaml (`'''`): same prefix and line as its `yaml: line 2: found unexpected end of stream`", () => {
    expect(messageOf('bad_yaml.yaml', "'''\n")).toBe("bad_yaml.yaml: error loading config file: yaml: line 2: Missing closing 'quote");
  });

  it.each([
    ['a tab as indentation', 'domain: d\n\tkey: x\n', 2],
    ['an unclosed flow map', 'domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: hour\n', 5],
    ['a reserved character', 'domain: @d\n', 1],
  ])('%s: `<file>: error loading config file: yaml: line N: <reason>`', (_name, text, line) => {
    expect(messageOf('r.yaml', text)).toMatch(new RegExp(`^r\\.yaml: error loading config file: yaml: line ${line}: \\S.*$`));
  });
});
