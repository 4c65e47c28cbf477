import type { Dirent } from 'node:fs';
import { readdir, stat } from 'node:fs/promises';
import { join, relative, resolve } from 'node:path';
import { ConfigError } from '../base/errors';

/**
 * Where the rule files are, as the reference's runtime loader (lyft/goruntime) finds them: it
 * walks a directory recursively and names each file by its path relative to it, `/` as `.`.
 * RUNTIME_WATCH_ROOT=true walks ROOT/SUBDIRECTORY and keeps the files whose name starts with
 * `APPDIRECTORY.` (so also a `config.yaml` or `config.d/` beside `config/`); false walks
 * ROOT/SUBDIRECTORY/APPDIRECTORY and keeps every file.
 */
export interface RuleTree {
  /** ROOT/SUBDIRECTORY/APPDIRECTORY: files are named by their path relative to it. */
  readonly rulesDir: string;
  /** The directory walked: `rulesDir`, or its parent when `keyPrefix` is set. */
  readonly walkRoot: string;
  /** Only files whose path under `walkRoot`, `/` as `.`, starts with this; '' keeps all. */
  readonly keyPrefix: string;
}

export interface RuntimeLocation {
  readonly root: string;
  readonly subdirectory: string;
  readonly appDirectory: string;
  readonly watchRoot: boolean;
}

/** The tree the server loads for the RUNTIME_* settings. */
export function ruleTreeOf(location: RuntimeLocation): RuleTree {
  const { root, subdirectory, appDirectory, watchRoot } = location;
  const rulesDir = resolve(root, subdirectory, appDirectory);
  // Without a subdirectory the reference loads nothing at all (goruntime's nil loader); the
  // rules directory alone is read then, not whatever `config.*` sits in ROOT.
  if (!watchRoot || appDirectory === '' || subdirectory === '') return directoryTree(rulesDir);
  return { rulesDir, walkRoot: resolve(root, subdirectory), keyPrefix: `${appDirectory.replaceAll('/', '.')}.` };
}

/** Every file under `dir` (what `floodgate check <dir>` and RUNTIME_WATCH_ROOT=false load). */
export function directoryTree(dir: string): RuleTree {
  const rulesDir = resolve(dir);
  return { rulesDir, walkRoot: rulesDir, keyPrefix: '' };
}

export interface TreeFile {
  /** The path relative to the rules directory (`team-a/x.yaml`, `../config.yaml`). */
  readonly name: string;
  readonly path: string;
}

export interface TreeListing {
  /** In name order (by code unit), so the load order is the same everywhere. */
  readonly files: readonly TreeFile[];
  /** Every directory walked, the walk root first: what a watcher must watch. */
  readonly directories: readonly string[];
}

/** The link kubelet's atomic writer points at the current copy of a volume's files. */
const ATOMIC_WRITER_DATA = '..data';

/** A walk visits at most this many entries and this many levels: far above any real tree. */
export const MAX_TREE_ENTRIES = 10_000;
export const MAX_TREE_DEPTH = 32;

/**
 * Lists the rule files of `tree` as goruntime's filepath.Walk finds them: subdirectories are
 * walked, a symlink to a file is a file, a symlink to a directory is not followed (goruntime
 * fails to read it and skips it), a dangling symlink or anything not a regular file is skipped.
 * With `ignoreDotFiles`, files and directories whose name starts with `.` are left out.
 * Unlike goruntime, the walk root and the rules directory are followed when they are symlinks
 * (goruntime then loads nothing at all). Throws ConfigError when the walk root is not a
 * readable directory or the tree is beyond the bounds.
 */
export async function listRuleTree(tree: RuleTree, ignoreDotFiles: boolean): Promise<TreeListing> {
  const walk = new TreeWalk(tree, ignoreDotFiles);
  await walk.directory(tree.walkRoot, '', 0);
  const files = walk.files.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return { files, directories: walk.directories };
}

class TreeWalk {
  readonly files: TreeFile[] = [];
  readonly directories: string[] = [];
  private entries = 0;

  constructor(
    private readonly tree: RuleTree,
    private readonly ignoreDotFiles: boolean,
  ) {}

  async directory(path: string, key: string, depth: number): Promise<void> {
    if (depth > MAX_TREE_DEPTH) throw new ConfigError(`${path}: rule directories nested more than ${MAX_TREE_DEPTH} deep`);
    let entries: Dirent[];
    try {
      entries = await readdir(path, { withFileTypes: true });
    } catch (err) {
      // Only the walk root must be readable; a subdirectory removed mid-walk is not part of
      // this snapshot (the watcher reloads once the change completes).
      if (depth > 0 && isCode(err, 'ENOENT')) return;
      throw new ConfigError(`${path}: cannot read rule directory: ${describe(err)}`, { cause: err });
    }
    this.directories.push(path);
    this.entries += entries.length;
    if (this.entries > MAX_TREE_ENTRIES) throw new ConfigError(`${this.tree.walkRoot}: more than ${MAX_TREE_ENTRIES} entries in the rule tree`);
    const atomicWriter = !this.ignoreDotFiles && entries.some((e) => e.name === ATOMIC_WRITER_DATA && e.isSymbolicLink());
    for (const entry of entries) {
      if (this.ignoreDotFiles && entry.name.startsWith('.')) continue;
      const childPath = join(path, entry.name);
      const childKey = key === '' ? entry.name : `${key}.${entry.name}`;
      if (atomicWriter && entry.name.startsWith('..')) {
        if (entry.name === ATOMIC_WRITER_DATA && this.mayHoldWanted(childKey)) await this.linkedDirectory(childPath, childKey, depth);
        continue;
      }
      await this.entry(childPath, childKey, entry, depth);
    }
  }

  /**
   * A Kubernetes volume (ConfigMap, Secret, projected) is written by kubelet's atomic writer:
   * the files live in a `..<timestamp>` directory, `..data` links to the current one, and each
   * visible name links through `..data`. During an update two timestamp directories exist for
   * a moment; `..data` is always the current one, so it is walked in their place (and the
   * visible links, the same real files, are then loaded once: see loadRuleTree).
   */
  private async linkedDirectory(path: string, key: string, depth: number): Promise<void> {
    const target = await stat(path).catch(() => undefined);
    if (target?.isDirectory()) await this.directory(path, key, depth + 1);
  }

  private async entry(path: string, key: string, entry: Dirent, depth: number): Promise<void> {
    if (entry.isDirectory()) {
      if (this.mayHoldWanted(key)) await this.directory(path, key, depth + 1);
      return;
    }
    if (entry.isFile()) {
      this.addFile(path, key);
      return;
    }
    if (!entry.isSymbolicLink()) return;
    const target = await stat(path).catch(() => undefined);
    if (target?.isFile()) this.addFile(path, key);
    // The rules directory itself may be a link (RUNTIME_WATCH_ROOT=true walks its parent).
    else if (target?.isDirectory() && path === this.tree.rulesDir) await this.directory(path, key, depth + 1);
  }

  private addFile(path: string, key: string): void {
    if (key.startsWith(this.tree.keyPrefix)) this.files.push({ name: relative(this.tree.rulesDir, path), path });
  }

  /** Whether a file below the directory `key` can have a name that starts with the prefix. */
  private mayHoldWanted(key: string): boolean {
    const below = `${key}.`;
    return below.startsWith(this.tree.keyPrefix) || this.tree.keyPrefix.startsWith(below);
  }
}

export function isCode(err: unknown, code: string): boolean {
  return typeof err === 'object' && err !== null && (err as NodeJS.ErrnoException).code === code;
}

function describe(err: unknown): string {
  if (isCode(err, 'ENOENT')) return 'no such directory';
  if (isCode(err, 'ENOTDIR')) return 'not a directory';
  return err instanceof Error ? err.message : String(err);
}
