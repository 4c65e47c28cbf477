// Issue 26, finding 4: a rule path that is a FIFO (or a link to one) blocked the read forever:
// the open itself waits for a writer, in a libuv thread that then also holds up the process's
// exit. The file is now opened without blocking and refused unless the opened file is a
// regular one; the caller keeps its rules.
import { execFileSync } from 'node:child_process';
import { constants, openSync, closeSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { loadRuleDirectory, loadRuleFile } from '../../src/config/load-rule-directory';
import { ConfigError } from '../../src/base/errors';

const GOOD = 'domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: minute, requests_per_unit: 5 }\n';

/** What a load came to within `ms`: its error, 'loaded', or 'still blocked'. */
async function outcome(load: Promise<unknown>, ms: number): Promise<unknown> {
  let timer: NodeJS.Timeout | undefined;
  const blocked = new Promise((resolve) => (timer = setTimeout(() => resolve('still blocked'), ms)));
  try {
    return await Promise.race([
      load.then(
        () => 'loaded',
        (err: unknown) => err,
      ),
      blocked,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** A reader blocked in open() on the FIFO is released by a writer's open and close. */
function releaseReaders(fifo: string): void {
  try {
    closeSync(openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK));
  } catch {
    // ENXIO: no reader waits on it.
  }
}

describe('a rule path that is not a regular file', () => {
  let dir: string;
  let fifo: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'floodgate-fifo-'));
    fifo = join(dir, 'pipe');
    execFileSync('mkfifo', [fifo]);
  });
  afterEach(() => {
    releaseReaders(fifo);
    rmSync(dir, { recursive: true, force: true });
  });

  test('a FIFO is refused at once, not read (floodgate check <fifo>)', async () => {
    const err = await outcome(loadRuleFile(fifo, { mergeDomainConfig: false }), 5000);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toBe(`pipe: cannot read rule file: not a regular file (a FIFO)`);
  });

  test('a link to a FIFO is refused at once as well', async () => {
    symlinkSync(fifo, join(dir, 'link.yaml'));
    const err = await outcome(loadRuleFile(join(dir, 'link.yaml'), { mergeDomainConfig: false }), 5000);
    expect((err as Error).message).toBe(`link.yaml: cannot read rule file: not a regular file (a FIFO)`);
  });

  test('a character device is refused too, and a regular file beside it still loads', async () => {
    const err = await outcome(loadRuleFile('/dev/zero', { mergeDomainConfig: false }), 5000);
    expect((err as Error).message).toBe(`zero: cannot read rule file: not a regular file (a character device)`);
    writeFileSync(join(dir, 'good.yaml'), GOOD);
    // The listing skips the FIFO itself (not a regular file), as the reference's walk does.
    const rules = await outcome(loadRuleDirectory(dir, { mergeDomainConfig: false, ignoreDotFiles: false }), 5000);
    expect(rules).toBe('loaded');
  });
});
