import { ConfigError } from '../base/errors';
import { statSync } from 'node:fs';
import { loadRuleDirectory, loadRuleFile, loadRuleTree } from '../config/load-rule-directory';
import { ruleTreeOf } from '../config/rule-tree';
import type { RuleSet } from '../config/rule-types';
import { loadSettings } from '../settings/settings';
import { EXIT_FINDINGS, EXIT_OK, UsageError, parseArgs, type CliIo } from './cli-io';

export const CHECK_USAGE = `usage: floodgate check [<dir> | <file>]

Validates every rule file in <dir>, subdirectories included, exactly as the server loads them
(same parser, same checks, same file order), or the one rule file <file>. Without <dir>, checks the files the server would
load from RUNTIME_ROOT, RUNTIME_SUBDIRECTORY, RUNTIME_APPDIRECTORY and RUNTIME_WATCH_ROOT.
MERGE_DOMAIN_CONFIG, RUNTIME_IGNOREDOTFILES and MAX_RULE_TREE_BYTES are read from the
environment, as the server reads them.

Prints one line per domain and exits 0, or prints 'file: message' for the first error and
exits 1.
`;

/** The rule files of `dir` (or of the RUNTIME_* tree), loaded and checked by the server's own code. */
export async function loadRulesLikeServer(dir: string | undefined): Promise<RuleSet> {
  const settings = loadSettings();
  const options = {
    mergeDomainConfig: settings.mergeDomainConfig,
    ignoreDotFiles: settings.runtimeIgnoreDotFiles,
    maxTreeBytes: settings.maxRuleTreeBytes,
  };
  if (dir !== undefined) return isFile(dir) ? loadRuleFile(dir, options) : loadRuleDirectory(dir, options);
  const tree = ruleTreeOf({
    root: settings.runtimeRoot,
    subdirectory: settings.runtimeSubdirectory,
    appDirectory: settings.runtimeAppDirectory,
    watchRoot: settings.runtimeWatchRoot,
  });
  return loadRuleTree(tree, options);
}

function isFile(path: string): boolean {
  return statSync(path, { throwIfNoEntry: false })?.isFile() === true;
}

/** `edge: 3 rules (2 fixed_window, 1 token_bucket), 1 unlimited, 1 shadow`; each limit of a `rate_limits` list is a rule. */
export function domainSummary(domain: string, rules: RuleSet): string {
  const list = rules.rulesByDomain.get(domain) ?? [];
  const limited = list.filter((r) => !r.unlimited);
  const algorithms = new Map<string, number>();
  for (const r of limited) algorithms.set(r.algorithm, (algorithms.get(r.algorithm) ?? 0) + 1);
  const parts = [...algorithms].sort(([a], [b]) => (a < b ? -1 : 1)).map(([a, n]) => `${n} ${a}`);
  let line = `${domain}: ${list.length} rule${list.length === 1 ? '' : 's'}`;
  if (parts.length > 0) line += ` (${parts.join(', ')})`;
  const unlimited = list.length - limited.length;
  const shadow = list.filter((r) => r.shadowMode).length;
  const replacing = list.filter((r) => r.replaces.length > 0).length;
  if (unlimited > 0) line += `, ${unlimited} unlimited`;
  if (shadow > 0) line += `, ${shadow} shadow`;
  if (replacing > 0) line += `, ${replacing} replacing`;
  const inLists = list.filter((r) => r.limitName !== undefined);
  // A list's limits share the descriptor's path: one path, one list.
  const lists = new Set(inLists.map((r) => r.fullKey)).size;
  if (lists > 0) line += `, ${inLists.length} in ${lists} rate_limits list${lists === 1 ? '' : 's'}`;
  return line;
}

export async function checkCommand(args: readonly string[], io: CliIo): Promise<number> {
  const parsed = parseArgs(args, [], []);
  if (parsed.positional.length > 1) throw new UsageError('check takes at most one directory or file');
  let rules: RuleSet;
  try {
    rules = await loadRulesLikeServer(parsed.positional[0]);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    io.err(`${err.message}\n`);
    return EXIT_FINDINGS;
  }
  const domains = [...rules.rulesByDomain.keys()].sort();
  for (const domain of domains) io.out(domainSummary(domain, rules) + '\n');
  return EXIT_OK;
}
