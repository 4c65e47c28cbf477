import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { trackChild } from '../harness/cleanup-registry';
import { goTestProgram } from './go-test-program';

/**
 * The test management server (test/xds-server, go-control-plane), built once per change of its
 * sources; see goTestProgram.
 */
export function xdsServerBinary(): string {
  return goTestProgram('xds-server', ['go.mod', 'go.sum', 'main.go']);
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
    const timer = setTimeout(() => reject(new Error(`xDS test server did not start in 30 s: ${stderr}`)), 30_000);
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
