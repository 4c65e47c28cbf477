import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { Worker } from 'node:worker_threads';
import { ConfigError } from '../base/errors';
import { deepFreeze } from './check-rules';
import { parseRuleFile, type DomainConfig } from './parse-rule-file';

export interface RuleFileText {
  readonly name: string;
  readonly text: string;
}

/** What the worker sends back: the parsed files, or the first error. */
export type WorkerAnswer = { readonly configs: DomainConfig[] } | { readonly error: string; readonly configError: boolean };

/**
 * Below this many bytes in all, files are parsed on the event loop: a few milliseconds, less
 * than starting a thread.
 */
export const INLINE_PARSE_BYTES = 32 * 1024;

/**
 * The time a parse may take for each 512 KiB batch of rule text (a 510 KB file took 1.1 s):
 * far above any real file. One deadline covers the whole parse, scaled by its bytes, so a large
 * tree (MAX_RULE_TREE_BYTES may be raised) is given the time its size needs.
 */
const PARSE_MS_PER_BATCH = 60_000;

/** How long a parse of `bytes` of rule text may take before it is refused (its worker stopped). */
export function parseTimeoutMs(bytes: number): number {
  return PARSE_MS_PER_BATCH * Math.max(1, Math.ceil(bytes / WORKER_BATCH_BYTES));
}

/** The worker's old generation: a 510 KB rule file needs some 45 MB (32 MB ran out). */
const WORKER_MAX_OLD_GENERATION_MB = 256;

/**
 * The parse workers' semi-space, in MB. V8 reads --max-semi-space-size when an isolate is
 * created, and it overrides a worker's resourceLimits: the shipped `--max-semi-space-size=16`
 * (set for the main thread's pauses) gave each parse worker a 48 MB young generation too, which
 * a parse fills with garbage. A 510 KB file then took a bare process to 156 MB of RSS; with 2 MB,
 * 122 MB (issue 26). Set once the main isolate exists, it changes only isolates created later:
 * the parse workers, the only ones floodgate creates.
 */
const WORKER_SEMI_SPACE_MB = 2;
let workerSemiSpaceSet = false;

function smallYoungGenerationForWorkers(): void {
  if (workerSemiSpaceSet) return;
  workerSemiSpaceSet = true;
  setFlagsFromString(`--max-semi-space-size=${WORKER_SEMI_SPACE_MB}`);
}

/**
 * The compiled worker script. Running from the TypeScript sources (the unit tests), there is
 * none, and files are parsed on the event loop.
 */
const WORKER_SCRIPT = join(__dirname, 'rule-file-worker.js');
const workerAvailable = existsSync(WORKER_SCRIPT);

/**
 * Parses rule files in order, with parseRuleFile's results and errors. Many bytes are parsed in
 * a worker thread, so that a large rule file (a 510 KB one took 1.1 s to parse) does not stall
 * the calls the service is answering meanwhile.
 */
export async function parseRuleFiles(files: readonly RuleFileText[], signal?: AbortSignal): Promise<DomainConfig[]> {
  signal?.throwIfAborted();
  const bytes = files.reduce((sum, file) => sum + file.text.length, 0);
  if (bytes < INLINE_PARSE_BYTES || !workerAvailable) return files.map((file) => parseRuleFile(file.name, file.text));
  const timeoutMs = parseTimeoutMs(bytes);
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(new ConfigError(`rule files not parsed within ${timeoutMs} ms`)), timeoutMs);
  timer.unref();
  // Aborted by the caller (a load given up) or by the deadline: the worker is stopped at once.
  const stop = signal === undefined ? deadline.signal : AbortSignal.any([signal, deadline.signal]);
  try {
    const configs: DomainConfig[] = [];
    // One worker per batch, in turn: a parse holds some 100 MB for a 510 KB file, freed when its
    // worker ends, so a tree's peak is one batch's, not the sum of its files' (issue 26).
    for (const batch of batches(files)) {
      const answer = await inWorker(batch, stop);
      if (!('configs' in answer)) throw answer.configError ? new ConfigError(answer.error) : new Error(answer.error);
      for (const config of answer.configs) configs.push(deepFreeze(config));
    }
    return configs;
  } finally {
    clearTimeout(timer);
  }
}

/** The bytes of rule files one worker parses: one file of the per-file bound, or many small ones. */
const WORKER_BATCH_BYTES = 512 * 1024;

/** `files` in order, in consecutive batches of at most WORKER_BATCH_BYTES (a larger file alone). */
function batches(files: readonly RuleFileText[]): RuleFileText[][] {
  const out: RuleFileText[][] = [];
  let current: RuleFileText[] = [];
  let bytes = 0;
  for (const file of files) {
    if (current.length > 0 && bytes + file.text.length > WORKER_BATCH_BYTES) {
      out.push(current);
      current = [];
      bytes = 0;
    }
    current.push(file);
    bytes += file.text.length;
  }
  if (current.length > 0) out.push(current);
  return out;
}

/** The batch parsed in a new worker, which is ended before this settles; `stop` ends it early. */
function inWorker(files: readonly RuleFileText[], stop: AbortSignal): Promise<WorkerAnswer> {
  if (stop.aborted) return Promise.reject(stop.reason as Error);
  smallYoungGenerationForWorkers();
  return new Promise((resolve, reject) => {
    const worker = new Worker(WORKER_SCRIPT, { resourceLimits: { maxOldGenerationSizeMb: WORKER_MAX_OLD_GENERATION_MB } });
    let settled = false;
    const finish = (outcome: () => void): void => {
      if (settled) return;
      settled = true;
      stop.removeEventListener('abort', onStop);
      // Settled once the worker is gone: the next batch's worker then starts with this one's
      // memory freed.
      void worker.terminate().then(outcome, outcome);
    };
    const onStop = (): void => finish(() => reject(stop.reason as Error));
    stop.addEventListener('abort', onStop);
    worker.once('message', (answer: WorkerAnswer) => finish(() => resolve(answer)));
    worker.once('error', (err) => finish(() => reject(new ConfigError(`rule files could not be parsed: ${err.message}`, { cause: err }))));
    worker.once('exit', (code) =>
      finish(() => reject(new ConfigError(`rule files could not be parsed: the parser stopped (exit code ${code})`))),
    );
    worker.postMessage(files);
  });
}
