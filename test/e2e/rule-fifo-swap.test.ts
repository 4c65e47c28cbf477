// Issue 26, finding 4: a FIFO swapped into the rule directory between the listing and the read
// blocked the read for ever: reloads stopped for good, nothing was logged, and SIGTERM never
// ended the process (alive 2 min 16 s later). Here, the real server process (built: `npm run
// build` first) with real file watching, a real FIFO (mkfifo) swapped in and out over the last
// rule file until a reload meets it, then a good file, then a real SIGTERM.
import { execFileSync } from 'node:child_process';
import { linkSync, mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, test } from 'vitest';
import { sleep, within } from '../harness/wait';
import { oneDescriptor, rlsClient } from '../helpers/rls-client';
import { spawnServer, type ServerWithRules } from '../helpers/server-process';

const limitFile = (n: number): string => `domain: moving\ndescriptors:\n  - key: k\n    rate_limit: { unit: hour, requests_per_unit: ${n} }\n`;

/** Files read before the swapped one (name order): they widen the gap between listing and reading. */
function filler(): Record<string, string> {
  const files: Record<string, string> = {};
  for (let i = 0; i < 200; i++) {
    files[`a-${String(i).padStart(3, '0')}.yaml`] =
      `domain: d${i}\ndescriptors:\n  - key: k\n    rate_limit: { unit: hour, requests_per_unit: 1 }\n`;
  }
  return files;
}

describe('a FIFO swapped into the rule directory', () => {
  let server: ServerWithRules | undefined;
  afterEach(() => server?.cleanup());

  test('the reload that meets it fails with the reason logged; later reloads and SIGTERM still work', async () => {
    server = await spawnServer({ ...filler(), 'zz-moving.yaml': limitFile(3) }, { SHUTDOWN_GRACE_MS: '2000' });
    const client = rlsClient(`127.0.0.1:${server.grpcPort}`);
    const limit = async (): Promise<number | undefined> =>
      (await client.shouldRateLimit(oneDescriptor('moving', { k: 'v' }, { hits_addend: { value: 0 } }))).statuses[0]?.current_limit
        ?.requests_per_unit;
    expect(await limit()).toBe(3);

    const stage = join(dirname(server.rulesDir), 'stage');
    mkdirSync(stage);
    const fifo = join(stage, 'fifo');
    execFileSync('mkfifo', [fifo]);
    const target = join(server.rulesDir, 'zz-moving.yaml');
    // Swap (rename, atomic) a FIFO and a regular file over the last rule file, until a reload
    // lists the file and then opens the FIFO. Bounded in time and count.
    const started = Date.now();
    let swaps = 0;
    const met = (): boolean => server?.output().includes('not a regular file') === true;
    while (!met() && Date.now() - started < 60_000 && swaps < 100_000) {
      linkSync(fifo, join(stage, 'fifo-link'));
      renameSync(join(stage, 'fifo-link'), target);
      await sleep(1);
      writeFileSync(join(stage, 'file'), limitFile(3));
      renameSync(join(stage, 'file'), target);
      await sleep(1);
      swaps++;
    }
    console.log(`FIFO swapped in ${swaps} times in ${Date.now() - started} ms before a reload met it`);
    const line = server
      .output()
      .split('\n')
      .find((l) => l.includes('not a regular file'));
    expect.soft(line ?? '(nothing logged)').toContain('zz-moving.yaml: cannot read rule file: not a regular file (a FIFO)');

    // Reloads go on: a good file is in force soon after.
    writeFileSync(join(stage, 'file'), limitFile(9));
    renameSync(join(stage, 'file'), target);
    const reloaded = await within(10_000, async () => (await limit()) === 9, 'the new limit in force').then(
      () => 'reloaded',
      (err: Error) => err.message,
    );
    expect.soft(reloaded).toBe('reloaded');
    client.close();

    // And SIGTERM ends the process.
    const t0 = Date.now();
    server.proc.kill('SIGTERM');
    const code = await Promise.race([server.exited, sleep(20_000).then(() => 'still running')]);
    console.log(`exit after SIGTERM: ${String(code)} in ${Date.now() - t0} ms`);
    expect(code).toBe(0);
  }, 120_000);
});
