import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { trackChild } from '../harness/cleanup-registry';

const SOURCE_DIR = join(__dirname, '..', 'xds-server');
const SOURCE_FILES = ['go.mod', 'go.sum', 'main.go'];

/**
 * The test management server (test/xds-server, go-control-plane), built with `go build` into a
 * cache directory keyed by its sources, once. A machine that cannot build it fails the test
 * with the build's own output: the xDS tests never pass without a real server.
 */
export function xdsServerBinary(): string {
  const hash = createHash('sha256');
  for (const name of SOURCE_FILES) hash.update(readFileSync(join(SOURCE_DIR, name)));
  const cacheDir = join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'floodgate-test');
  const binary = join(cacheDir, `xds-server-${hash.digest('hex').slice(0, 16)}`);
  if (existsSync(binary)) return binary;
  mkdirSync(cacheDir, { recursive: true });
  const partial = `${binary}.${process.pid}.partial`;
  try {
    execFileSync('go', ['build', '-o', partial, '.'], { cwd: SOURCE_DIR, stdio: ['ignore', 'pipe', 'pipe'], timeout: 600_000 });
  } catch (err) {
    const failure = err as { stderr?: Buffer; message: string };
    throw new Error(`cannot build the xDS test server (go build in ${SOURCE_DIR}): ${failure.stderr?.toString() || failure.message}`, {
      cause: err,
    });
  }
  renameSync(partial, binary);
  return binary;
}

export interface RateLimitConfigJson {
  readonly name: string;
  readonly domain: string;
  readonly descriptors: readonly unknown[];
}

export interface SeenRequest {
  readonly stream_id: number;
  readonly node_id: string;
  readonly node_metadata: Record<string, unknown> | null;
  readonly version_info: string;
  readonly response_nonce: string;
  readonly type_url: string;
  readonly error_detail?: string;
  readonly headers: Record<string, string> | null;
}

export interface XdsServerOptions {
  /** host:port to listen on for ADS; a free port when absent. */
  readonly listen?: string;
  /** The last snapshot pushed is kept here and served again after a restart. */
  readonly statePath: string;
  readonly tls?: { readonly cert: string; readonly key: string; readonly clientCa?: string };
  /** The node ID the snapshots are for (`default` when absent). */
  readonly node?: string;
}

export interface XdsServer {
  /** host:port of the ADS endpoint. */
  readonly address: string;
  push(version: string, resources: readonly RateLimitConfigJson[]): Promise<void>;
  requests(): Promise<SeenRequest[]>;
  /** SIGKILL: the server goes away without a goodbye. */
  kill(): Promise<void>;
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

export async function startXdsServer(options: XdsServerOptions): Promise<XdsServer> {
  const args = ['-listen', options.listen ?? '127.0.0.1:0', '-admin', '127.0.0.1:0', '-state', options.statePath];
  if (options.node !== undefined) args.push('-node', options.node);
  if (options.tls) {
    args.push('-tls-cert', options.tls.cert, '-tls-key', options.tls.key);
    if (options.tls.clientCa) args.push('-client-ca', options.tls.clientCa);
  }
  const child = spawn(xdsServerBinary(), args, { stdio: ['ignore', 'pipe', 'pipe'] });
  trackChild(child);
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  const ready = await new Promise<{ grpc: string; admin: string }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`xDS test server did not start in 10 s: ${stderr}`)), 10_000);
    child.once('exit', (code) => reject(new Error(`xDS test server exited (${code}): ${stderr}`)));
    createInterface({ input: child.stdout }).on('line', (line) => {
      const m = /^ready grpc=(\S+) admin=(\S+)$/.exec(line);
      if (m) {
        clearTimeout(timer);
        resolve({ grpc: m[1] as string, admin: m[2] as string });
      }
    });
  });
  const adminUrl = `http://${ready.admin}`;
  return {
    address: ready.grpc,
    async push(version, resources) {
      const res = await fetch(`${adminUrl}/snapshot`, { method: 'POST', body: JSON.stringify({ version, resources }) });
      if (res.status !== 204) throw new Error(`snapshot push failed: ${res.status} ${await res.text()}`);
    },
    async requests() {
      return ((await (await fetch(`${adminUrl}/requests`)).json()) as SeenRequest[] | null) ?? [];
    },
    async kill() {
      child.kill('SIGKILL');
      await exited(child);
    },
  };
}
