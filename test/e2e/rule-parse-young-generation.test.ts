// Issue 26 review, finding 2: the parse worker's heap. The shipped `--max-semi-space-size=16`
// is process-wide in V8 and overrides a worker's resourceLimits, so each parse worker grew a
// 32 MB young generation of its own on top of the main thread's (a 510 KB file: 156 MB of RSS
// in a bare process, 122 MB with a 2 MB semi-space). Runs the built code (`npm run build` first).
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../../src/base/paths';
import { largeRuleFile } from '../abuse/attacks';
import { SERVER_NODE_FLAGS } from '../helpers/server-process';

const run = promisify(execFile);

/** Parses a 510 KB file; prints the young generation of each parse worker (its heap limit less its old generation). */
const SCRIPT = `
const threads = require('node:worker_threads');
const young = [];
const postMessage = threads.Worker.prototype.postMessage;
threads.Worker.prototype.postMessage = function (message) {
  this.once('online', () => young.push(this.getHeapStatistics().then((s) => s.heap_size_limit / 2 ** 20 - 256)));
  return postMessage.call(this, message);
};
const { parseRuleFiles } = require(${JSON.stringify(join(projectRoot, 'dist/src/config/parse-rule-files.js'))});
const text = require('node:fs').readFileSync(0, 'utf8');
parseRuleFiles([{ name: 'a.yaml', text }]).then(async (configs) => {
  console.log(JSON.stringify({ files: configs.length, youngMb: await Promise.all(young) }));
});
`;

describe('the rule parse worker', () => {
  it('has a young generation of a few MB under the shipped Node flags, not the main thread 48 MB', async () => {
    const child = run(process.execPath, [...SERVER_NODE_FLAGS, '-e', SCRIPT], { timeout: 60_000 });
    child.child.stdin?.end(largeRuleFile());
    const { files, youngMb } = JSON.parse((await child).stdout) as { files: number; youngMb: number[] };
    expect(files).toBe(1);
    expect(youngMb).toHaveLength(1);
    expect(youngMb[0]).toBeLessThanOrEqual(8);
  }, 90_000);
});
