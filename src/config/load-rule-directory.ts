import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { ConfigError } from '../errors';
import { compileRules } from './compile-rules';
import { parseRuleFile, type DomainConfig } from './parse-rule-file';
import type { RuleSet } from './rule-types';

export interface RuleDirectoryOptions {
  readonly mergeDomainConfig: boolean;
  readonly ignoreDotFiles: boolean;
}

/**
 * Loads every regular file of `dir` (symlinks followed; subdirectories skipped) as one rule
 * file, in name order, and compiles them together. Any problem rejects the whole load with a
 * ConfigError, so the caller keeps its previous rules.
 */
export async function loadRuleDirectory(dir: string, options: RuleDirectoryOptions): Promise<RuleSet> {
  const names = await listDirectory(dir);
  const configs: DomainConfig[] = [];
  for (const name of names) {
    if (options.ignoreDotFiles && name.startsWith('.')) continue;
    const text = await readRegularFile(join(dir, name));
    if (text !== undefined) configs.push(parseRuleFile(name, text));
  }
  return compileRules(configs, { mergeDomainConfig: options.mergeDomainConfig });
}

async function listDirectory(dir: string): Promise<string[]> {
  try {
    // Sorted by code unit so the load order (and which file an error names) is the same everywhere.
    return (await readdir(dir)).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  } catch (err) {
    throw new ConfigError(`${dir}: cannot read rule directory: ${describe(err)}`, { cause: err });
  }
}

/**
 * The file's text, or undefined when it is not a regular file. A Kubernetes ConfigMap mounts
 * each file as a symlink into `..data/`, next to the `..data` symlink and a `..<timestamp>`
 * directory: stat (not lstat) reads through the links, and directories are skipped.
 */
async function readRegularFile(path: string): Promise<string | undefined> {
  try {
    const info = await stat(path);
    if (!info.isFile()) return undefined;
    return await readFile(path, 'utf8');
  } catch (err) {
    // Removed between readdir and read, or a dangling link left while a ConfigMap swaps:
    // the file is not part of this snapshot; the watcher reloads once the swap completes.
    if (isCode(err, 'ENOENT')) return undefined;
    throw new ConfigError(`${path}: cannot read rule file: ${describe(err)}`, { cause: err });
  }
}

function isCode(err: unknown, code: string): boolean {
  return typeof err === 'object' && err !== null && (err as NodeJS.ErrnoException).code === code;
}

function describe(err: unknown): string {
  if (isCode(err, 'ENOENT')) return 'no such directory';
  if (isCode(err, 'ENOTDIR')) return 'not a directory';
  return err instanceof Error ? err.message : String(err);
}
