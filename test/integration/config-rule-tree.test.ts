import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadRuleTree } from '../../src/config/load-rule-directory';
import { ruleTreeOf } from '../../src/config/rule-tree';

/**
 * Issue 19, finding 4: rule files in subdirectories. The reference is the judge: its runtime
 * loader (goruntime) walks the rule tree recursively. reference-loads.json records what
 * /work/scratch/bin/ratelimit loaded from the trees of build-trees.sh (domains from its debug
 * /rlconfig), in both RUNTIME_WATCH_ROOT modes, with and without RUNTIME_IGNOREDOTFILES.
 */
const FIXTURES = join(__dirname, '../fixtures/config/rule-trees');

interface ReferenceRun {
  readonly tree: string;
  readonly watchRoot: boolean;
  readonly ignoreDotFiles: boolean;
  readonly domains: readonly string[];
  readonly error?: string;
}

const RUNS = (JSON.parse(readFileSync(join(FIXTURES, 'reference-loads.json'), 'utf8')) as { runs: ReferenceRun[] }).runs;

/**
 * Where floodgate deliberately does better (README: differences), each a load the reference
 * turns into serving with no rules:
 * - a ConfigMap without RUNTIME_IGNOREDOTFILES: the reference reads each file twice (the link
 *   and `..<timestamp>/`) and refuses the load as duplicate domains; floodgate loads each once;
 * - a rules directory that is itself a symlink: the reference does not walk into it.
 */
const BETTER: Readonly<Record<string, readonly string[]>> = {
  'configmap true false': ['cm_a', 'cm_b'],
  'configmap false false': ['cm_a', 'cm_b'],
  'linkroot true false': ['lr_a'],
  'linkroot true true': ['lr_a'],
  'linkroot false false': ['lr_a'],
  'linkroot false true': ['lr_a'],
};

describe('rule trees: what the reference loads, floodgate loads (issue 19, finding 4)', () => {
  let base: string;

  beforeAll(async () => {
    base = await mkdtemp(join(tmpdir(), 'floodgate-trees-'));
    execFileSync('bash', [join(FIXTURES, 'build-trees.sh'), base]);
  });

  afterAll(async () => {
    await rm(base, { recursive: true, force: true });
  });

  it.each(RUNS.map((run) => [`${run.tree} watchRoot=${run.watchRoot} ignoreDotFiles=${run.ignoreDotFiles}`, run] as const))(
    '%s',
    async (_name, run) => {
      const tree = ruleTreeOf({ root: join(base, run.tree), subdirectory: 'ratelimit', appDirectory: 'config', watchRoot: run.watchRoot });
      const rules = await loadRuleTree(tree, { mergeDomainConfig: false, ignoreDotFiles: run.ignoreDotFiles });
      const loaded = [...rules.rulesByDomain.keys()].sort();
      const better = BETTER[`${run.tree} ${run.watchRoot} ${run.ignoreDotFiles}`];
      expect(loaded).toEqual(better ?? run.domains);
    },
  );

  it('without a RUNTIME_SUBDIRECTORY (the reference then loads nothing), ROOT/APPDIRECTORY is read, not the config.* beside it', async () => {
    // Recorded the same way, RUNTIME_ROOT=<mixed>/ratelimit and no RUNTIME_SUBDIRECTORY: the
    // reference logs "no runtime configuration. using nil loader." and /rlconfig is empty.
    const tree = ruleTreeOf({ root: join(base, 'mixed', 'ratelimit'), subdirectory: '', appDirectory: 'config', watchRoot: true });
    const rules = await loadRuleTree(tree, { mergeDomainConfig: false, ignoreDotFiles: true });
    expect([...rules.rulesByDomain.keys()].sort()).toEqual(['a', 'linkfile', 'team_a', 'team_b_deep']);
  });
});
