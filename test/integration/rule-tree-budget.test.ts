// Issue 26, finding 5: the rule tree had no total size (40 valid files of 508 KB: 559 MB of
// RSS). MAX_RULE_TREE_BYTES bounds all rule files together: a tree over it is refused whole,
// from the files' sizes before any is read, and a file that grows past the budget after its
// size was taken stops being read there.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { DEFAULT_MAX_RULE_TREE_BYTES, loadRuleDirectory } from '../../src/config/load-rule-directory';
import { ConfigError } from '../../src/base/errors';

/** A valid rule file of exactly `bytes` bytes (padded with a comment). */
function ruleFile(domain: string, bytes: number): string {
  const head = `domain: ${domain}\ndescriptors:\n  - key: k\n    rate_limit: { unit: minute, requests_per_unit: 5 }\n#`;
  return head + 'x'.repeat(bytes - head.length - 1) + '\n';
}

describe('MAX_RULE_TREE_BYTES', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'floodgate-budget-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const load = (maxTreeBytes?: number) =>
    loadRuleDirectory(dir, { mergeDomainConfig: false, ignoreDotFiles: false, ...(maxTreeBytes !== undefined && { maxTreeBytes }) });

  test('defaults to 1 MiB, the cap of a ConfigMap', () => {
    expect(DEFAULT_MAX_RULE_TREE_BYTES).toBe(1024 * 1024);
  });

  test('a tree at its budget loads; one byte more is refused whole, naming the directory and the bound', async () => {
    mkdirSync(join(dir, 'sub'));
    writeFileSync(join(dir, 'a.yaml'), ruleFile('a', 30_000));
    writeFileSync(join(dir, 'sub/b.yaml'), ruleFile('b', 30_000));
    expect((await load(60_000)).domainCount).toBe(2);
    const err = await load(59_999).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toBe(`${dir}: rule files of 60000 bytes or more in all, more than the limit of 59999 (MAX_RULE_TREE_BYTES)`);
  });

  test('the sizes are added before anything is read: 40 files of 508 KB (sparse, never written) are refused at the default', async () => {
    // Sparse files: their size says 508 KB, and reading one would give zeros (an invalid file).
    for (let i = 0; i < 40; i++) {
      writeFileSync(join(dir, `f${i}.yaml`), '');
      truncateSync(join(dir, `f${i}.yaml`), 508 * 1024);
    }
    await expect(load()).rejects.toThrow(
      `${dir}: rule files of ${40 * 508 * 1024} bytes or more in all, more than the limit of ${DEFAULT_MAX_RULE_TREE_BYTES} (MAX_RULE_TREE_BYTES)`,
    );
  });

  test('a file larger than its size said (a /proc file says 0) stops being read at the budget', async () => {
    // /proc/self/maps says 0 bytes and holds several KB: only what is read can count.
    expect(readFileSync('/proc/self/maps').length).toBeGreaterThan(3000);
    writeFileSync(join(dir, 'a.yaml'), ruleFile('a', 1000));
    symlinkSync('/proc/self/maps', join(dir, 'b.yaml'));
    const err = await load(2000).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toMatch(
      new RegExp(`^${dir}: rule files of \\d+ bytes or more in all, more than the limit of 2000 \\(MAX_RULE_TREE_BYTES\\)$`),
    );
  });
});
