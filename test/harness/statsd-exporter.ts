import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { trackChild } from './cleanup-registry';
import { freePort } from './free-port';
import { waitUntil } from './wait';

/**
 * The real prometheus/statsd_exporter (the Go binary), as a statsd sidecar of the reference runs:
 * statsd in on one loopback port (TCP and UDP), Prometheus out on another. scripts/test.sh installs
 * it with `go install` into $(go env GOPATH)/bin; STATSD_EXPORTER_BIN overrides the path.
 */
export function statsdExporterBinary(): string {
  const explicit = process.env['STATSD_EXPORTER_BIN'];
  const candidates: string[] = explicit ? [explicit] : [];
  if (!explicit) {
    try {
      const gopath = execFileSync('go', ['env', 'GOPATH'], { encoding: 'utf8', timeout: 10_000 }).trim();
      candidates.push(join(gopath, 'bin', 'statsd_exporter'));
    } catch {
      // No Go toolchain: only an explicit path or one on PATH can help.
    }
    candidates.push(...(process.env['PATH'] ?? '').split(':').map((dir) => join(dir, 'statsd_exporter')));
  }
  const found = candidates.find((path) => path !== '' && existsSync(path));
  if (found === undefined) {
    // A missing exporter is a broken environment, never a passing test.
    throw new Error(
      `statsd_exporter is required by the statsd tests but was not found (looked at ${candidates.slice(0, 2).join(', ')}). ` +
        'Install it with:\n  go install github.com/prometheus/statsd_exporter@v0.28.0\n(scripts/test.sh does this when it is missing)',
    );
  }
  return found;
}

export interface StatsdExporter {
  /** Where floodgate sends statsd (TCP and UDP). */
  readonly statsdPort: number;
  readonly webPort: number;
  /** The exporter's /metrics text. */
  scrape(): Promise<string>;
  stop(): Promise<void>;
}

export async function startStatsdExporter(mappingConfig: string): Promise<StatsdExporter> {
  const bin = statsdExporterBinary();
  const statsdPort = await freePort();
  const webPort = await freePort();
  const child: ChildProcess = spawn(
    bin,
    [
      `--statsd.listen-udp=127.0.0.1:${statsdPort}`,
      `--statsd.listen-tcp=127.0.0.1:${statsdPort}`,
      `--web.listen-address=127.0.0.1:${webPort}`,
      `--statsd.mapping-config=${mappingConfig}`,
      '--log.level=warn',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  trackChild(child);
  let log = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    log = (log + chunk.toString()).slice(-10_000);
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const scrape = async (): Promise<string> => {
    const res = await fetch(`http://127.0.0.1:${webPort}/metrics`, { signal: AbortSignal.timeout(5000) });
    if (!res.ok) throw new Error(`statsd_exporter /metrics answered ${res.status}`);
    return res.text();
  };
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 3000))]);
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  };
  try {
    await waitUntil('statsd_exporter to serve /metrics', async () => (await scrape()).length > 0, {
      timeoutMs: 30_000,
      diagnostics: () => log,
    });
  } catch (err) {
    await stop();
    throw err;
  }
  return { statsdPort, webPort, scrape, stop };
}
