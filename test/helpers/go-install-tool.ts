import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A Go command at an exact version, `go install <package>@<version>` from the Go module proxy,
 * into a cache directory named by both (once per version). A machine that cannot build it
 * fails the test with the build's own output: a test that needs the tool never passes without it.
 */
export function goInstalledTool(goPackage: string, version: string): string {
  const name = goPackage.split('/').pop() as string;
  const cacheDir = join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'floodgate-test');
  const binary = join(cacheDir, `${name}-${version}`);
  if (existsSync(binary)) return binary;
  const gobin = join(cacheDir, `${name}-${version}.${process.pid}.partial`);
  mkdirSync(gobin, { recursive: true });
  try {
    // Outside any module (tmpdir), so the project's own go.mod files play no part.
    execFileSync('go', ['install', `${goPackage}@${version}`], {
      cwd: tmpdir(),
      env: { ...process.env, GOBIN: gobin, GOFLAGS: '-mod=mod' },
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: 600_000,
    });
    renameSync(join(gobin, name), binary);
  } catch (err) {
    const failure = err as { stderr?: Buffer; message: string };
    throw new Error(`cannot build ${goPackage}@${version} (go install): ${failure.stderr?.toString() || failure.message}`, { cause: err });
  } finally {
    rmSync(gobin, { recursive: true, force: true });
  }
  return binary;
}
