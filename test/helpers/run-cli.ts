// The real `floodgate` bin (bin/floodgate.js, running dist/; `npm run build` first) as a child
// process, with a clean environment.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { projectRoot } from '../../src/base/paths';

export interface CliRun {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

export const FLOODGATE_BIN = join(projectRoot, 'bin', 'floodgate.js');

export function runCli(args: readonly string[], env: Record<string, string> = {}): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [FLOODGATE_BIN, ...args],
      { env: { PATH: process.env['PATH'] ?? '', ...env }, timeout: 60_000 },
      (err, stdout, stderr) => {
        if (err === null) return resolve({ code: 0, stdout, stderr });
        // A timeout or a signal has no exit code: that is a failed run, not an answer.
        if (typeof err.code !== 'number') return reject(new Error(`floodgate ${args.join(' ')}: ${err.message}`, { cause: err }));
        resolve({ code: err.code, stdout, stderr });
      },
    );
  });
}
