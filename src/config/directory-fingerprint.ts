import { realpath, stat } from 'node:fs/promises';
import { listRuleTree, type RuleTree } from './rule-tree';

export interface TreeFingerprint {
  /** Equal texts mean a reload would read the same bytes. */
  readonly text: string;
  /** The directories the listing walked (subdirectories included): what to watch. */
  readonly directories: readonly string[];
}

/**
 * A cheap summary of what a rule load would read from `tree`: the real path of the walk root
 * (so a swapped root symlink shows), every directory walked and, for each rule file, its real
 * path (so a swapped `..data` link shows), size, inode and times. File contents are not read.
 */
export async function treeFingerprint(tree: RuleTree, ignoreDotFiles: boolean): Promise<TreeFingerprint> {
  let listing;
  let rootReal: string;
  try {
    rootReal = await realpath(tree.walkRoot);
    listing = await listRuleTree(tree, ignoreDotFiles);
  } catch (err) {
    return { text: `missing:${errorCode(err)}`, directories: [] };
  }
  const files = await Promise.all(listing.files.map((file) => fileFingerprint(file.path, file.name)));
  return { text: [rootReal, ...listing.directories, ...files].join('\n'), directories: listing.directories };
}

async function fileFingerprint(path: string, name: string): Promise<string> {
  try {
    const [real, info] = await Promise.all([realpath(path), stat(path, { bigint: true })]);
    return [name, real, info.size, info.ino, info.mtimeNs, info.ctimeNs].join('|');
  } catch (err) {
    // Removed mid-scan: still part of the picture, so a later fix changes the fingerprint.
    return `${name}|error:${errorCode(err)}`;
  }
}

function errorCode(err: unknown): string {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return code ?? (err instanceof Error ? err.message : 'unknown');
}
