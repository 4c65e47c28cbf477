// The worker thread of parse-rule-files.ts: parses rule files off the event loop. A parse is
// synchronous and costs some microseconds per byte (a 510 KB file took 1.1 s), too long to
// hold the loop that answers calls.
import { parentPort } from 'node:worker_threads';
import { ConfigError } from '../base/errors';
import { parseRuleFile } from './parse-rule-file';
import type { RuleFileText, WorkerAnswer } from './parse-rule-files';

parentPort?.once('message', (files: readonly RuleFileText[]) => {
  let answer: WorkerAnswer;
  try {
    answer = { configs: files.map((file) => parseRuleFile(file.name, file.text)) };
  } catch (err) {
    answer = { error: err instanceof Error ? err.message : String(err), configError: err instanceof ConfigError };
  }
  parentPort?.postMessage(answer);
});
