// The real `floodgate` bin (bin/floodgate.js, running dist/; `npm run build` first) as a child
// process, with a clean environment.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { projectRoot } from '../../src/paths';

export interface CliRun {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

export const FLOODGATE_BIN = join(projectRoot, 'bin', 'floodgate.js');

export function runCli(args: readonly string[], env: Record<string, string> = {}): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [FLOODGATE_BIN, ...args], { env: { PATH: process.env['PATH'] ?? '', ...env }, timeout: 60_000 }, (err, stdout, stderr) => {
      if (err && typeof err.code !== 'number') return reject(err);
      resolve({ code: err ? (err.code as number) : 0, stdout, stderr });
    });
  });
}
