// The built server (`npm run build` first) as a real child process, for tests that need a real
// process: SIGTERM, SIGKILL in the middle of load, several servers side by side.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { projectRoot } from '../../src/base/paths';

/** The V8 flags the image runs the server with (NODE_OPTIONS in deploy/Dockerfile, and `npm start`). */
export const SERVER_NODE_FLAGS: readonly string[] = [
  '--max-semi-space-size=4',
  '--single-threaded-gc',
  '--initial-old-space-size=96',
  '--max-old-space-size=160',
];

/** The built server (`dist/src/main.js`) as a real child process. */
export interface ServerProcess {
  readonly proc: ChildProcess;
  readonly grpcPort: number;
  readonly httpPort: number;
  readonly debugPort: number;
  readonly exited: Promise<number | null>;
  /** stderr so far. */
  output(): string;
  /** Removes the rules directory; kills the process if it still runs. */
  cleanup(): void;
}

/** A server spawned with its own rules directory. */
export interface ServerWithRules extends ServerProcess {
  /** The directory of its rule files (writing into it triggers a reload). */
  readonly rulesDir: string;
}

/** Spawns the built server with its own rules directory and `env` (plus loopback ports 0). */
export async function spawnServer(rules: Record<string, string>, env: Record<string, string>): Promise<ServerWithRules> {
  const root = mkdtempSync(join(tmpdir(), 'floodgate-proc-'));
  mkdirSync(join(root, 'config'));
  for (const [name, text] of Object.entries(rules)) writeFileSync(join(root, 'config', name), text);
  const server = await spawnWithEnv(
    {
      RUNTIME_ROOT: root,
      RUNTIME_WATCH_ROOT: 'false',
      HOST: '127.0.0.1',
      PORT: '0',
      GRPC_HOST: '127.0.0.1',
      GRPC_PORT: '0',
      DEBUG_PORT: '0',
      USE_PROMETHEUS: 'false',
      // A test that wants statsd turns it on; elsewhere nothing listens on localhost:8125.
      USE_STATSD: 'false',
      LOG_LEVEL: 'ERROR',
      ...env,
    },
    () => rmSync(root, { recursive: true, force: true }),
  );
  return { ...server, rulesDir: join(root, 'config') };
}

/** Parses a `KEY=value` environment file (as `docker run --env-file` reads one). */
export function parseEnvFile(text: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const trimmed = line.trim();
    if (trimmed === '' || trimmed.startsWith('#')) continue;
    const eq = trimmed.indexOf('=');
    if (eq <= 0) throw new Error(`not KEY=value: '${line}'`);
    env[trimmed.slice(0, eq)] = trimmed.slice(eq + 1);
  }
  return env;
}

/** Spawns the built server with exactly `env` (and PATH), nothing added: an operator's environment file. */
export function spawnServerWithEnv(env: Record<string, string>): Promise<ServerProcess> {
  return spawnWithEnv(env, () => undefined);
}

/** How a container runtime would start it: this executable, as this user. */
export interface LaunchAs {
  /** The program to execute (its own shebang picks the interpreter), with no arguments. */
  readonly command: string;
  readonly uid?: number;
  readonly gid?: number;
}

/** Spawns `launch.command` with exactly `env` (and PATH), as a Deployment's `command:` would. */
export function spawnCommandWithEnv(launch: LaunchAs, env: Record<string, string>): Promise<ServerProcess> {
  return spawnWithEnv(env, () => undefined, launch);
}

async function spawnWithEnv(env: Record<string, string>, removeFiles: () => void, launch?: LaunchAs): Promise<ServerProcess> {
  const [file, args] = launch ? [launch.command, []] : [process.execPath, [...SERVER_NODE_FLAGS, join(projectRoot, 'dist/src/main.js')]];
  const proc = spawn(file, args, {
    // The interpreter that runs the tests comes first, for a shebang's `env node`.
    env: { PATH: `${dirname(process.execPath)}:${process.env.PATH}`, ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
    ...(launch?.uid !== undefined ? { uid: launch.uid } : {}),
    ...(launch?.gid !== undefined ? { gid: launch.gid } : {}),
  });
  let err = '';
  proc.stderr.on('data', (chunk: Buffer) => {
    err = (err + chunk.toString()).slice(-20_000);
  });
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  const cleanup = (): void => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
    removeFiles();
  };
  try {
    const ports = await new Promise<{ grpcPort: number; httpPort: number; debugPort: number }>((resolve, reject) => {
      // A wait for a condition: a busy machine may take tens of seconds to start a node process.
      const timer = setTimeout(() => reject(new Error(`server did not start in 60 s: ${err}`)), 60_000);
      const onData = (): void => {
        // Hosts as the banner joins them: `127.0.0.1:8081`, `[::]:8081`, `localhost:6070`.
        const m =
          /serving gRPC on (?:\[[\da-f:.]+\]|[\w.-]+):(\d+), HTTP on (?:\[[\da-f:.]+\]|[\w.-]+):(\d+), debug on (?:\[[\da-f:.]+\]|[\w.-]+):(\d+)/.exec(
            err,
          );
        if (m) {
          clearTimeout(timer);
          proc.stderr.off('data', onData);
          resolve({ grpcPort: Number(m[1]), httpPort: Number(m[2]), debugPort: Number(m[3]) });
        }
      };
      proc.stderr.on('data', onData);
      proc.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`server exited with ${code}: ${err}`));
      });
    });
    return { proc, exited, ...ports, output: () => err, cleanup };
  } catch (e) {
    cleanup();
    throw e;
  }
}
