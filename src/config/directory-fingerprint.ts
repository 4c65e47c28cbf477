import { readdir, realpath, stat } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * A cheap summary of what a rule load would read from `dir`: for the directory and each entry,
 * its real path (so a swapped `..data` or root symlink shows), type, size, inode and times.
 * Equal fingerprints mean a reload would read the same bytes; file contents are not read.
 */
export async function directoryFingerprint(dir: string): Promise<string> {
  let names: string[];
  let dirReal: string;
  try {
    dirReal = await realpath(dir);
    names = (await readdir(dir)).sort();
  } catch (err) {
    return `missing:${errorCode(err)}`;
  }
  const parts = await Promise.all(names.map((name) => entryFingerprint(join(dir, name), name)));
  return `${dirReal}\n${parts.join('\n')}`;
}

async function entryFingerprint(path: string, name: string): Promise<string> {
  try {
    const [real, info] = await Promise.all([realpath(path), stat(path, { bigint: true })]);
    const type = info.isFile() ? 'f' : info.isDirectory() ? 'd' : 'o';
    return [name, real, type, info.size, info.ino, info.mtimeNs, info.ctimeNs].join('|');
  } catch (err) {
    // A dangling link or an entry removed mid-scan: still part of the picture, so a later
    // fix changes the fingerprint.
    return `${name}|error:${errorCode(err)}`;
  }
}

function errorCode(err: unknown): string {
  return (err as NodeJS.ErrnoException | undefined)?.code ?? 'unknown';
}
