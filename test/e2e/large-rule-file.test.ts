// Issue 18, finding 4 (its last line): a 510 KB rule file is parsed in a worker thread (the
// built code: `npm run build` first), with the same results and errors as on the event loop.
// Its stall figure is the `reload: a 510 KB rule file` attack of `npm run abuse`.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { largeRuleFile } from '../abuse/attacks';
import { runCli } from '../helpers/run-cli';

describe('a 510 KB rule file, parsed off the event loop', () => {
  let dir: string;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'floodgate-large-'));
  });

  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('loads with every rule', async () => {
    const text = largeRuleFile();
    const rules = (text.match(/- key: path/g) ?? []).length;
    await writeFile(join(dir, 'large.yaml'), text);
    const started = Date.now();
    const run = await runCli(['check', dir]);
    console.log(`floodgate check of a ${(text.length / 1024).toFixed(0)} KB rule file (${rules} rules): ${Date.now() - started} ms`);
    expect(run).toEqual({ code: 0, stdout: `large: ${rules} rules (${rules} fixed_window)\n`, stderr: '' });
  }, 120_000);

  it('reports an error at its end as the inline parse does: file, message', async () => {
    await writeFile(join(dir, 'large.yaml'), `${largeRuleFile()}  - key: last\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n`);
    expect(await runCli(['check', dir])).toEqual({ code: 1, stdout: '', stderr: "large.yaml: invalid rate limit unit 'fortnight'\n" });
  }, 120_000);
});
