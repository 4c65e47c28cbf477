import { execFileSync } from 'node:child_process';

export const INSTALL_HINT = 'apt-get update -qq && apt-get install -y redis-server';

/** The redis-server and redis-cli executables; override with REDIS_SERVER_BIN / REDIS_CLI_BIN. */
export const REDIS_SERVER_BIN = process.env['REDIS_SERVER_BIN'] ?? 'redis-server';
export const REDIS_CLI_BIN = process.env['REDIS_CLI_BIN'] ?? 'redis-cli';

let checked: string | undefined;

/**
 * Throws a clear error when redis-server or redis-cli cannot be run. Tests that need Redis call
 * this instead of skipping: a missing server is a broken environment, not a passing test.
 * Returns the server's version line.
 */
export function requireRedisServer(): string {
  if (checked !== undefined) return checked;
  const version = probe(REDIS_SERVER_BIN);
  probe(REDIS_CLI_BIN);
  checked = version;
  return version;
}

function probe(bin: string): string {
  try {
    return execFileSync(bin, ['--version'], { encoding: 'utf8', timeout: 5000 }).trim();
  } catch (err) {
    throw new Error(
      `${bin} is required by the integration tests but could not be run ` +
        `(${(err as Error).message.split('\n')[0]}). Install it with:\n  ${INSTALL_HINT}`,
      { cause: err },
    );
  }
}
