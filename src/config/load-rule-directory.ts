import { constants, type Stats } from 'node:fs';
import { open, realpath, stat } from 'node:fs/promises';
import { basename } from 'node:path';
import { ConfigError } from '../base/errors';
import { compileRules } from './compile-rules';
import { MAX_RULE_FILE_BYTES } from './parse-rule-file';
import { parseRuleFiles, type RuleFileText } from './parse-rule-files';
import { directoryTree, isCode, listRuleTree, type RuleTree, type TreeFile } from './rule-tree';
import type { RuleSet } from './rule-types';

export interface RuleDirectoryOptions {
  readonly mergeDomainConfig: boolean;
  readonly ignoreDotFiles: boolean;
  /** MAX_RULE_TREE_BYTES: the bytes of all rule files together; default {@link DEFAULT_MAX_RULE_TREE_BYTES}. */
  readonly maxTreeBytes?: number;
  /** Aborts the load (the watcher gave it up): reading and parsing stop, the worker is ended. */
  readonly signal?: AbortSignal;
}

/**
 * A ConfigMap's own cap (1 MiB), so the shipped layout never meets it; a git-sync or hostPath
 * tree larger than that needs MAX_RULE_TREE_BYTES raised. Loading costs memory in proportion:
 * 20 MB of rule files took a server to 559 MB of RSS (issue 26); the largest tree this default
 * admits (two 510 KB files, three reloads) peaks at 195-205 MiB (idle 90).
 */
export const DEFAULT_MAX_RULE_TREE_BYTES = 1024 * 1024;

/** The bytes a load may still read before the tree is over its budget. */
class TreeBudget {
  private used = 0;
  constructor(
    private readonly rulesDir: string,
    readonly max: number,
  ) {}

  /** What this tree may still read. */
  get left(): number {
    return this.max - this.used;
  }

  /** Counts `bytes` as read (or about to be); over the budget, the whole load is refused. */
  take(bytes: number): void {
    this.used += bytes;
    if (this.used > this.max) this.refuse(this.used);
  }

  refuse(bytes: number): never {
    throw new ConfigError(
      `${this.rulesDir}: rule files of ${bytes} bytes or more in all, more than the limit of ${this.max} (MAX_RULE_TREE_BYTES)`,
    );
  }
}

/**
 * Loads every rule file of `tree` (see listRuleTree: subdirectories included, as the reference
 * loads them), in name order, and compiles them together. A file reached by several paths (a
 * Kubernetes ConfigMap's `x.yaml` and `..<timestamp>/x.yaml`) is loaded once. Any problem
 * rejects the whole load with a ConfigError, so the caller keeps its previous rules.
 */
export async function loadRuleTree(tree: RuleTree, options: RuleDirectoryOptions): Promise<RuleSet> {
  const listing = await listRuleTree(tree, options.ignoreDotFiles);
  const files = await onePathPerFile(listing.files);
  const budget = new TreeBudget(tree.rulesDir, options.maxTreeBytes ?? DEFAULT_MAX_RULE_TREE_BYTES);
  // Sizes first: a tree over its budget is refused before any file is read (issue 26).
  const listed = await listedBytes(files);
  if (listed > budget.max) budget.refuse(listed);
  const texts: RuleFileText[] = [];
  for (const file of files) {
    options.signal?.throwIfAborted();
    const text = await readRuleFile(file, budget);
    if (text !== undefined) texts.push({ name: file.name, text });
  }
  return compileRules(await parseRuleFiles(texts, options.signal), { mergeDomainConfig: options.mergeDomainConfig });
}

/** Every file under `dir`, subdirectories included (what `floodgate check <dir>` loads). */
export function loadRuleDirectory(dir: string, options: RuleDirectoryOptions): Promise<RuleSet> {
  return loadRuleTree(directoryTree(dir), options);
}

/** One rule file on its own, read, parsed and compiled as the server does (`floodgate check <file>`). */
export async function loadRuleFile(path: string, options: Pick<RuleDirectoryOptions, 'mergeDomainConfig'>): Promise<RuleSet> {
  const file = { path, name: basename(path) };
  const text = await readRuleFile(file, new TreeBudget(path, MAX_RULE_FILE_BYTES));
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

/** The files' sizes together, as stat sees them now (a file gone since the listing counts 0). */
async function listedBytes(files: readonly TreeFile[]): Promise<number> {
  let bytes = 0;
  for (const file of files) bytes += (await stat(file.path).catch(() => undefined))?.size ?? 0;
  return bytes;
}

function dotComponents(name: string): number {
  return name.split('/').filter((part) => part.startsWith('.') && part !== '..').length;
}

const READ_CHUNK_BYTES = 64 * 1024;

/**
 * Opened without blocking: a FIFO swapped in after the listing (or a link to one) would block
 * open() until a writer came, in a libuv thread that also holds up the process's exit (issue 26:
 * reloads stopped for good and SIGTERM never ended the process). O_NONBLOCK does not change
 * reads of a regular file, the only kind read (checked on the opened file, so no swap after
 * the check can change it).
 */
const OPEN_FLAGS = constants.O_RDONLY | constants.O_NONBLOCK;

/** What the opened file is, in words, when it is not a regular file. */
function notRegular(info: Stats): string | undefined {
  if (info.isFile()) return undefined;
  if (info.isFIFO()) return 'a FIFO';
  if (info.isCharacterDevice()) return 'a character device';
  if (info.isBlockDevice()) return 'a block device';
  if (info.isSocket()) return 'a socket';
  if (info.isDirectory()) return 'a directory';
  return 'of another kind';
}

/**
 * The file's text, read up to the size limit (a link may point at anything: a huge file, or a
 * /proc file whose size says 0); undefined when it vanished between the listing and the read.
 * Anything but a regular file is refused, unread.
 */
async function readRuleFile(file: TreeFile, budget: TreeBudget): Promise<string | undefined> {
  let handle;
  try {
    handle = await open(file.path, OPEN_FLAGS);
  } catch (err) {
    // Removed between listing and reading, or a link left dangling while a ConfigMap swaps:
    // the file is not part of this snapshot; the watcher reloads once the swap completes.
    if (isCode(err, 'ENOENT')) return undefined;
    throw new ConfigError(`${file.name}: cannot read rule file: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
  try {
    const info = await handle.stat();
    const kind = notRegular(info);
    if (kind !== undefined) throw new ConfigError(`${file.name}: cannot read rule file: not a regular file (${kind})`);
    if (info.size > MAX_RULE_FILE_BYTES) throw fileTooLarge(file, info.size);
    // The opened file's size, checked before reading it; what is read is counted again as it
    // comes (a file that grows, or a /proc file whose size says 0), and reading stops over either bound.
    budget.take(info.size);
    const chunks: Buffer[] = [];
    let length = 0;
    while (length <= MAX_RULE_FILE_BYTES && length <= info.size + budget.left) {
      const chunk = Buffer.allocUnsafe(READ_CHUNK_BYTES);
      const { bytesRead } = await handle.read(chunk, 0, chunk.length, null);
      if (bytesRead === 0) break;
      chunks.push(chunk.subarray(0, bytesRead));
      length += bytesRead;
    }
    if (length > MAX_RULE_FILE_BYTES) throw fileTooLarge(file, Math.max((await handle.stat()).size, length));
    if (length > info.size) budget.take(length - info.size);
    return Buffer.concat(chunks, length).toString('utf8');
  } finally {
    await handle.close();
  }
}

function fileTooLarge(file: TreeFile, size: number): ConfigError {
  return new ConfigError(`${file.name}: error loading config file: ${size} bytes, more than the limit of ${MAX_RULE_FILE_BYTES}`);
}
