import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadRuleDirectory } from '../../src/config/load-rule-directory';
import { ConfigError } from '../../src/base/errors';

/**
 * Issue 18, finding 12: a rule file that is a symlink to /proc/self/environ logged the whole
 * environment. Rule files may be symlinks (ConfigMaps are), so the defence is the length of the
 * quote: an error quotes at most a short, escaped excerpt of what the file holds.
 */
const SECRET = 'hunter2-fake-secret-0123456789';
const ENVIRON = `PATH=/usr/local/bin:/usr/bin\0HOME=/root\0DB_PASSWORD=${SECRET}\0API_TOKEN=${SECRET}\0`;
const LONG = `x-${'y'.repeat(40)}-${SECRET}`;

const CASES: readonly (readonly [string, string])[] = [
  ['the environment (NUL-separated): a whole-file scalar', ENVIRON],
  ['KEY=value lines: a whole-file scalar', ENVIRON.replaceAll('\0', '\n')],
  ['an unknown key', `domain: d\n${LONG}: 1\n`],
  ['a key that is not a string', `domain: d\n? [${LONG}]\n: 1\n`],
  ['a list item that is not a map', `domain: d\ndescriptors:\n  - ${LONG}\n`],
  ['an invalid unit', `domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: ${LONG}, requests_per_unit: 1}}\n`],
  ['an invalid algorithm', `domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 1, algorithm: ${LONG}}}\n`],
  ['a wrong type', `domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: ${LONG}}}\n`],
  ['a duplicate composite key', `domain: d\ndescriptors:\n  - {key: k, value: ${LONG}}\n  - {key: k, value: ${LONG}}\n`],
  ['share_threshold without a wildcard', `domain: d\ndescriptors:\n  - {key: k, value: ${LONG}, share_threshold: true}\n`],
];

describe('a rule-load error quotes at most a short, escaped excerpt of the file (issue 18, finding 12)', () => {
  let dir: string;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'floodgate-excerpt-'));
  });

  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it.each(CASES)('%s', async (_name, content) => {
    await writeFile(join(dir, 'secret'), content);
    await mkdir(join(dir, 'config'));
    await symlink(join(dir, 'secret'), join(dir, 'config', 'rules.yaml'));
    const error = await loadRuleDirectory(join(dir, 'config'), { mergeDomainConfig: false, ignoreDotFiles: false }).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(ConfigError);
    const message = (error as Error).message;
    console.log(`${_name}: ${message.length} characters: ${JSON.stringify(message)}`);
    expect(message).not.toContain('hunter2');
    expect(message).not.toContain('DB_PASSWORD');
    expect(message.length).toBeLessThan(200);
    // Escaped: no control character of the file reaches the log line (yaml.v2's own
    // "unmarshal errors:\n  " layout is the only newline).
    // eslint-disable-next-line no-control-regex
    expect(message.replace('unmarshal errors:\n  ', '')).not.toMatch(/[\u0000-\u001f\u007f]/);
  });

  it('a whole-file scalar is quoted as yaml.v2 quotes it: 7 bytes and "..."', async () => {
    // The reference's own message (yaml.v2 decode.go terror) for the environment.
    await mkdir(join(dir, 'config'));
    await writeFile(join(dir, 'config', 'rules.yaml'), ENVIRON);
    await expect(loadRuleDirectory(join(dir, 'config'), { mergeDomainConfig: false, ignoreDotFiles: false })).rejects.toThrow(
      'rules.yaml: error loading config file: yaml: unmarshal errors:\n  line 1: cannot unmarshal !!str `PATH=/u...` into map[interface {}]interface {}',
    );
  });
});
