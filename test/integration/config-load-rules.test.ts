import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadRuleDirectory } from '../../src/config/load-rule-directory';
import { ConfigError } from '../../src/base/errors';

const OPTIONS = { mergeDomainConfig: false, ignoreDotFiles: false };

function rule(domain: string, key: string, limit: number): string {
  return `domain: ${domain}\ndescriptors:\n  - key: ${key}\n    rate_limit: {unit: second, requests_per_unit: ${limit}}\n`;
}

describe('loadRuleDirectory', () => {
  let dir: string;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'floodgate-load-'));
  });

  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('loads every regular file, subdirectories included, sorted by relative path (issue 19, finding 4)', async () => {
    await writeFile(join(dir, 'b.yaml'), rule('b', 'k', 2));
    await writeFile(join(dir, 'a.yml'), rule('a', 'k', 1));
    await writeFile(join(dir, 'no-extension'), rule('c', 'k', 3));
    await mkdir(join(dir, 'team-b', 'deep'), { recursive: true });
    await writeFile(join(dir, 'team-b', 'deep', 'y.yaml'), rule('deep', 'k', 4));
    await mkdir(join(dir, 'team-a'));
    await writeFile(join(dir, 'team-a', 'x.yaml'), rule('x', 'k', 5));
    const rules = await loadRuleDirectory(dir, OPTIONS);
    expect(rules.rules.map((r) => r.fullKey)).toEqual(['a.k', 'b.k', 'c.k', 'x.k', 'deep.k']);
  });

  it('names a file in a subdirectory by its path relative to the rules directory', async () => {
    await mkdir(join(dir, 'team-b', 'deep'), { recursive: true });
    await writeFile(join(dir, 'team-b', 'deep', 'y.yaml'), 'domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight}\n');
    await expect(loadRuleDirectory(dir, OPTIONS)).rejects.toThrow(new ConfigError("team-b/deep/y.yaml: invalid rate limit unit 'fortnight'"));
  });

  it('a ConfigMap read without RUNTIME_IGNOREDOTFILES loads each file once, by its visible name', async () => {
    // The reference reads both `a.yaml` and `..<timestamp>/a.yaml` and refuses the load as
    // duplicate domains (test/fixtures/config/rule-trees/reference-loads.json).
    const stamp = join(dir, '..2026_01_01_00_00_00.000000001');
    await mkdir(stamp);
    await writeFile(join(stamp, 'a.yaml'), 'domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight}\n');
    await symlink('..2026_01_01_00_00_00.000000001', join(dir, '..data'));
    await symlink('..data/a.yaml', join(dir, 'a.yaml'));
    await expect(loadRuleDirectory(dir, OPTIONS)).rejects.toThrow(new ConfigError("a.yaml: invalid rate limit unit 'fortnight'"));
  });

  it('an empty directory gives an empty rule set', async () => {
    const rules = await loadRuleDirectory(dir, OPTIONS);
    expect(rules.domainCount).toBe(0);
  });

  it('reads a Kubernetes ConfigMap layout: symlinks into ..data, timestamped dir skipped', async () => {
    const stamp = join(dir, '..2026_01_01_00_00_00.000000001');
    await mkdir(stamp);
    await writeFile(join(stamp, 'ratelimit.yaml'), rule('k8s', 'k', 7));
    await symlink('..2026_01_01_00_00_00.000000001', join(dir, '..data'));
    await symlink('..data/ratelimit.yaml', join(dir, 'ratelimit.yaml'));
    // With or without ignoring dot files, the file is loaded once (dot entries are directories).
    for (const ignoreDotFiles of [false, true]) {
      const rules = await loadRuleDirectory(dir, { mergeDomainConfig: false, ignoreDotFiles });
      expect(rules.rules.map((r) => [r.fullKey, r.requestsPerUnit])).toEqual([['k8s.k', 7]]);
    }
  });

  it('a ConfigMap in the middle of an update (two timestamp directories) loads the current copy once', async () => {
    // kubelet writes the new `..<timestamp>` directory, swaps `..data`, then removes the old one.
    for (const [stamp, limit] of [
      ['..2026_01_01_00_00_00.000000001', 1],
      ['..2026_01_02_00_00_00.000000002', 2],
    ] as const) {
      await mkdir(join(dir, stamp, 'team-a'), { recursive: true });
      await writeFile(join(dir, stamp, 'a.yaml'), rule('a', 'k', limit));
      await writeFile(join(dir, stamp, 'team-a', 'x.yaml'), rule('x', 'k', limit));
    }
    await symlink('..2026_01_02_00_00_00.000000002', join(dir, '..data'));
    await symlink('..data/a.yaml', join(dir, 'a.yaml'));
    // An item with a path in a subdirectory: its visible name is a link to a directory.
    await symlink('..data/team-a', join(dir, 'team-a'));
    const rules = await loadRuleDirectory(dir, OPTIONS);
    expect(rules.rules.map((r) => [r.fullKey, r.requestsPerUnit])).toEqual([
      ['x.k', 2],
      ['a.k', 2],
    ]);
  });

  it('follows a symlinked rule directory', async () => {
    const real = join(dir, 'real');
    await mkdir(real);
    await writeFile(join(real, 'r.yaml'), rule('linked', 'k', 1));
    await symlink(real, join(dir, 'config'));
    expect((await loadRuleDirectory(join(dir, 'config'), OPTIONS)).hasDomain('linked')).toBe(true);
  });

  it('skips a dangling symlink (a file removed while a ConfigMap swaps)', async () => {
    await writeFile(join(dir, 'a.yaml'), rule('a', 'k', 1));
    await symlink('..data/gone.yaml', join(dir, 'gone.yaml'));
    expect((await loadRuleDirectory(dir, OPTIONS)).domainCount).toBe(1);
  });

  it('ignores dot files only when asked', async () => {
    await writeFile(join(dir, 'a.yaml'), rule('a', 'k', 1));
    await writeFile(join(dir, '.hidden.yaml'), rule('hidden', 'k', 1));
    expect((await loadRuleDirectory(dir, { ...OPTIONS, ignoreDotFiles: true })).hasDomain('hidden')).toBe(false);
    expect((await loadRuleDirectory(dir, { ...OPTIONS, ignoreDotFiles: false })).hasDomain('hidden')).toBe(true);
  });

  it('rejects the whole load when one file is invalid, naming the file', async () => {
    await writeFile(join(dir, 'a.yaml'), rule('a', 'k', 1));
    await writeFile(join(dir, 'b.yaml'), 'domain: b\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight}\n');
    await expect(loadRuleDirectory(dir, OPTIONS)).rejects.toThrow(new ConfigError("b.yaml: invalid rate limit unit 'fortnight'"));
  });

  it('rejects a duplicate domain unless merging, and merges when asked', async () => {
    await writeFile(join(dir, 'a.yaml'), rule('d', 'x', 1));
    await writeFile(join(dir, 'b.yaml'), rule('d', 'y', 2));
    await expect(loadRuleDirectory(dir, OPTIONS)).rejects.toThrow("b.yaml: duplicate domain 'd' in config file");
    const merged = await loadRuleDirectory(dir, { ...OPTIONS, mergeDomainConfig: true });
    expect(merged.rules.map((r) => r.fullKey)).toEqual(['d.x', 'd.y']);
  });

  it('rejects a missing directory with a ConfigError naming the path', async () => {
    const missing = join(dir, 'nope');
    const error = await loadRuleDirectory(missing, OPTIONS).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).toBe(`${missing}: cannot read rule directory: no such directory`);
  });

  it('rejects a path that is a file, not a directory', async () => {
    await writeFile(join(dir, 'file'), 'x');
    await expect(loadRuleDirectory(join(dir, 'file'), OPTIONS)).rejects.toThrow(
      `${join(dir, 'file')}: cannot read rule directory: not a directory`,
    );
  });
});
