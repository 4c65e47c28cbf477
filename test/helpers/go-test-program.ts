import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

/**
 * A Go program under test/ (its own go.mod), built with `go build` into a cache directory keyed
 * by its sources, once per change. A machine that cannot build it fails the test with the
 * build's own output: a test that needs the program never passes without it.
 */
export function goTestProgram(directory: string, sourceFiles: readonly string[]): string {
  const sourceDir = join(__dirname, '..', directory);
  const hash = createHash('sha256');
  for (const name of sourceFiles) hash.update(readFileSync(join(sourceDir, name)));
  const cacheDir = join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'floodgate-test');
  const binary = join(cacheDir, `${directory}-${hash.digest('hex').slice(0, 16)}`);
  if (existsSync(binary)) return binary;
  mkdirSync(cacheDir, { recursive: true });
  const partial = `${binary}.${process.pid}.partial`;
  try {
    execFileSync('go', ['build', '-o', partial, '.'], { cwd: sourceDir, stdio: ['ignore', 'pipe', 'pipe'], timeout: 600_000 });
  } catch (err) {
    const failure = err as { stderr?: Buffer; message: string };
    throw new Error(`cannot build ${directory} (go build in ${sourceDir}): ${failure.stderr?.toString() || failure.message}`, { cause: err });
  }
  renameSync(partial, binary);
  return binary;
}
