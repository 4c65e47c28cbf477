// The built server (`npm run build` first) as a real child process, for tests that need a real
// process: SIGTERM, SIGKILL in the middle of load, several servers side by side.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { projectRoot } from '../../src/paths';

/** The built server (`dist/src/main.js`) as a real child process. */
export interface ServerProcess {
  readonly proc: ChildProcess;
  readonly grpcPort: number;
  readonly httpPort: number;
  /** The directory of its rule files (writing into it triggers a reload). */
  readonly rulesDir: string;
  readonly exited: Promise<number | null>;
  /** stderr so far. */
  output(): string;
  /** Removes the rules directory; kills the process if it still runs. */
  cleanup(): void;
}

/** Spawns the built server with its own rules directory and `env` (plus loopback ports 0). */
export async function spawnServer(rules: Record<string, string>, env: Record<string, string>): Promise<ServerProcess> {
  const root = mkdtempSync(join(tmpdir(), 'floodgate-proc-'));
  mkdirSync(join(root, 'config'));
  for (const [name, text] of Object.entries(rules)) writeFileSync(join(root, 'config', name), text);
  const proc = spawn(process.execPath, [join(projectRoot, 'dist/src/main.js')], {
    env: {
      PATH: process.env.PATH,
      RUNTIME_ROOT: root,
      RUNTIME_WATCH_ROOT: 'false',
      HOST: '127.0.0.1',
      PORT: '0',
      GRPC_HOST: '127.0.0.1',
      GRPC_PORT: '0',
      DEBUG_PORT: '0',
      USE_PROMETHEUS: 'false',
      LOG_LEVEL: 'ERROR',
      ...env,
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  proc.stderr!.on('data', (chunk: Buffer) => {
    err = (err + chunk.toString()).slice(-20_000);
  });
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  const cleanup = (): void => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
    rmSync(root, { recursive: true, force: true });
  };
  try {
    const ports = await new Promise<{ grpcPort: number; httpPort: number }>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`server did not start: ${err}`)), 15_000);
      const onData = (): void => {
        const m = /serving gRPC on [\d.]+:(\d+), HTTP on [\d.]+:(\d+)/.exec(err);
        if (m) {
          clearTimeout(timer);
          proc.stderr!.off('data', onData);
          resolve({ grpcPort: Number(m[1]), httpPort: Number(m[2]) });
        }
      };
      proc.stderr!.on('data', onData);
      proc.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`server exited with ${code}: ${err}`));
      });
    });
    return { proc, exited, ...ports, rulesDir: join(root, 'config'), output: () => err, cleanup };
  } catch (e) {
    cleanup();
    throw e;
  }
}

