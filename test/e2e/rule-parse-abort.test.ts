// Issue 26 review, finding 1: a rule load the watcher gives up must stop, so that its parse
// worker cannot overlap the next load's. Runs the built code (`npm run build` first): the
// worker script exists only there.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../../src/base/paths';
import { largeRuleFile } from '../abuse/attacks';
import { SERVER_NODE_FLAGS } from '../helpers/server-process';

const run = promisify(execFile);

/** Parses two 510 KB files (two worker batches), aborting at once; prints the outcome and the workers terminated. */
const SCRIPT = `
const threads = require('node:worker_threads');
let terminated = 0;
const terminate = threads.Worker.prototype.terminate;
threads.Worker.prototype.terminate = function () { terminated += 1; return terminate.call(this); };
const { parseRuleFiles } = require(${JSON.stringify(join(projectRoot, 'dist/src/config/parse-rule-files.js'))});
const text = require('node:fs').readFileSync(0, 'utf8');
const stop = new AbortController();
const parsing = parseRuleFiles([{ name: 'a.yaml', text }, { name: 'b.yaml', text: text.replace('domain: large', 'domain: other') }], stop.signal);
stop.abort(new Error('given up'));
parsing.then(
  (configs) => console.log('parsed ' + configs.length + ', workers terminated ' + terminated),
  (err) => console.log('rejected: ' + err.message + ', workers terminated ' + terminated),
);
`;

describe('a rule parse given up', () => {
  it('stops: its worker is terminated and no later batch starts', async () => {
    const child = run(process.execPath, [...SERVER_NODE_FLAGS, '-e', SCRIPT], { timeout: 60_000 });
    child.child.stdin?.end(largeRuleFile());
    const { stdout } = await child;
    expect(stdout).toBe('rejected: given up, workers terminated 1\n');
  }, 90_000);
});
