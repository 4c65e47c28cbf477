import { open, realpath } from 'node:fs/promises';
import { basename } from 'node:path';
import { ConfigError } from '../errors';
import { compileRules } from './compile-rules';
import { MAX_RULE_FILE_BYTES } from './parse-rule-file';
import { parseRuleFiles, type RuleFileText } from './parse-rule-files';
import { directoryTree, isCode, listRuleTree, type RuleTree, type TreeFile } from './rule-tree';
import type { RuleSet } from './rule-types';

export interface RuleDirectoryOptions {
  readonly mergeDomainConfig: boolean;
  readonly ignoreDotFiles: boolean;
}

/**
 * Loads every rule file of `tree` (see listRuleTree: subdirectories included, as the reference
 * loads them), in name order, and compiles them together. A file reached by several paths (a
 * Kubernetes ConfigMap's `x.yaml` and `..<timestamp>/x.yaml`) is loaded once. Any problem
 * rejects the whole load with a ConfigError, so the caller keeps its previous rules.
 */
export async function loadRuleTree(tree: RuleTree, options: RuleDirectoryOptions): Promise<RuleSet> {
  const listing = await listRuleTree(tree, options.ignoreDotFiles);
  const texts: RuleFileText[] = [];
  for (const file of await onePathPerFile(listing.files)) {
    const text = await readRuleFile(file);
    if (text !== undefined) texts.push({ name: file.name, text });
  }
  return compileRules(await parseRuleFiles(texts), { mergeDomainConfig: options.mergeDomainConfig });
}

/** Every file under `dir`, subdirectories included (what `floodgate check <dir>` loads). */
export function loadRuleDirectory(dir: string, options: RuleDirectoryOptions): Promise<RuleSet> {
  return loadRuleTree(directoryTree(dir), options);
}

/** One rule file on its own, read, parsed and compiled as the server does (`floodgate check <file>`). */
export async function loadRuleFile(path: string, options: Pick<RuleDirectoryOptions, 'mergeDomainConfig'>): Promise<RuleSet> {
  const file = { path, name: basename(path) };
  const text = await readRuleFile(file);
  if (text === undefined) throw new ConfigError(`${path}: cannot read rule file: no such file`);
  return compileRules(await parseRuleFiles([{ name: file.name, text }]), { mergeDomainConfig: options.mergeDomainConfig });
}

/**
 * One path per real file. With RUNTIME_IGNOREDOTFILES=false the reference reads a ConfigMap's
 * files twice, through the visible link and in the `..<timestamp>` directory, and then refuses
 * the load as duplicate domains, serving with no rules; here the visible name is kept.
 */
async function onePathPerFile(files: readonly TreeFile[]): Promise<TreeFile[]> {
  const byReal = new Map<string, TreeFile>();
  const kept: TreeFile[] = [];
  for (const file of files) {
    const real = await realpath(file.path).catch(() => file.path);
    const seen = byReal.get(real);
    if (seen === undefined) {
      byReal.set(real, file);
      kept.push(file);
    } else if (dotComponents(file.name) < dotComponents(seen.name)) {
      byReal.set(real, file);
      kept[kept.indexOf(seen)] = file;
    }
  }
  return kept.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

function dotComponents(name: string): number {
  return name.split('/').filter((part) => part.startsWith('.') && part !== '..').length;
}

const READ_CHUNK_BYTES = 64 * 1024;

/**
 * The file's text, read up to the size limit (a link may point at anything: a huge file, or a
 * /proc file whose size says 0); undefined when it vanished between the listing and the read.
 */
async function readRuleFile(file: TreeFile): Promise<string | undefined> {
  let handle;
  try {
    handle = await open(file.path, 'r');
  } catch (err) {
    // Removed between listing and reading, or a link left dangling while a ConfigMap swaps:
    // the file is not part of this snapshot; the watcher reloads once the swap completes.
    if (isCode(err, 'ENOENT')) return undefined;
    throw new ConfigError(`${file.name}: cannot read rule file: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
  try {
    const chunks: Buffer[] = [];
    let length = 0;
    while (length <= MAX_RULE_FILE_BYTES) {
      const chunk = Buffer.allocUnsafe(READ_CHUNK_BYTES);
      const { bytesRead } = await handle.read(chunk, 0, chunk.length, null);
      if (bytesRead === 0) break;
      chunks.push(chunk.subarray(0, bytesRead));
      length += bytesRead;
    }
    if (length > MAX_RULE_FILE_BYTES) {
      const size = Math.max((await handle.stat()).size, length);
      throw new ConfigError(`${file.name}: error loading config file: ${size} bytes, more than the limit of ${MAX_RULE_FILE_BYTES}`);
    }
    return Buffer.concat(chunks, length).toString('utf8');
  } finally {
    await handle.close();
  }
}
