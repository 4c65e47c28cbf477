// Issue 28, section 4, the quick start: scripts/rls-call.js finds the server where GRPC_PORT
// (and GRPC_HOST) put it, as `npm start` does, and documents --addr; the README says how to
// change every port; the first start says it is compiling before it does.
import { execFile, spawn } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { projectRoot } from '../../src/base/paths';
import { trackChild } from '../harness/cleanup-registry';
import { freePort } from '../harness/free-port';
import { spawnServer } from '../helpers/server-process';

const RLS_CALL = join(projectRoot, 'scripts/rls-call.js');

function rlsCall(args: readonly string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [RLS_CALL, ...args],
      { env: { PATH: process.env['PATH'] ?? '', ...env }, timeout: 30_000 },
      (err, stdout, stderr) => resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : -1, stdout, stderr }),
    );
  });
}

const RULES = { 'q.yaml': 'domain: q\ndescriptors:\n  - key: k\n    rate_limit: { unit: minute, requests_per_unit: 5 }\n' };

describe('scripts/rls-call.js', () => {
  test('calls the server on GRPC_PORT (and GRPC_HOST) when no --addr is given', async () => {
    const grpcPort = await freePort();
    const server = await spawnServer(RULES, { GRPC_PORT: String(grpcPort) });
    try {
      const run = await rlsCall(['q', 'k=v'], { GRPC_PORT: String(grpcPort), GRPC_HOST: '127.0.0.1' });
      expect(run.stderr).toBe('');
      expect(run.code).toBe(0);
      expect((JSON.parse(run.stdout) as { overallCode: string; statuses: { limitRemaining: number }[] }).statuses[0]?.limitRemaining).toBe(4);
      // GRPC_HOST as a server sets it (all interfaces) is reached through localhost.
      const anyHost = await rlsCall(['q', 'k=v'], { GRPC_PORT: String(grpcPort), GRPC_HOST: '0.0.0.0' });
      expect(anyHost.code, anyHost.stderr).toBe(0);
      // --addr wins over the environment.
      const byAddr = await rlsCall(['q', 'k=v', '--addr', `127.0.0.1:${grpcPort}`], { GRPC_PORT: '1' });
      expect(byAddr.code, byAddr.stderr).toBe(0);
    } finally {
      server.cleanup();
    }
  });

  test('its usage documents --addr, --hits and GRPC_PORT', async () => {
    const run = await rlsCall(['--help'], {});
    expect(run.code).toBe(0);
    for (const word of ['--addr host:port', '--hits N', 'GRPC_PORT', 'GRPC_HOST']) expect(run.stdout).toContain(word);
  });
});

describe('README quick start', () => {
  test('says how to change each port, and how rls-call.js follows', () => {
    const readme = readFileSync(join(projectRoot, 'README.md'), 'utf8');
    const quickStart = readme.slice(readme.indexOf('## Quick start'), readme.indexOf('## Tests'));
    for (const variable of ['GRPC_PORT', 'PORT', 'DEBUG_PORT', 'PROMETHEUS_ADDR']) expect(quickStart).toContain(`\`${variable}\``);
    expect(quickStart).toContain('GRPC_PORT=9081 npm start');
    expect(quickStart).toContain('--addr');
  });
});

describe('the first start', () => {
  test('says it is compiling, before it compiles', { timeout: 180_000 }, async () => {
    // A checkout without dist/: the sources and the bin, the installed packages linked.
    const dir = mkdtempSync(join(tmpdir(), 'floodgate-first-start-'));
    try {
      for (const name of ['bin', 'src', 'package.json', 'tsconfig.json', 'tsconfig.build.json'])
        cpSync(join(projectRoot, name), join(dir, name), { recursive: true });
      symlinkSync(join(projectRoot, 'node_modules'), join(dir, 'node_modules'));
      const proc = spawn(process.execPath, [join(dir, 'bin/floodgate.js'), 'check', join(projectRoot, 'config')], {
        env: { PATH: process.env['PATH'] ?? '' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      trackChild(proc);
      let stderr = '';
      let distWhenAnnounced: boolean | undefined;
      proc.stderr.on('data', (chunk: Buffer) => {
        stderr += chunk.toString();
        if (distWhenAnnounced === undefined && stderr.includes('\n')) distWhenAnnounced = existsSync(join(dir, 'dist/src/cli/main.js'));
      });
      const code = await new Promise<number | null>((resolve) => proc.once('exit', resolve));
      expect(code, stderr).toBe(0);
      expect(stderr.split('\n')[0]).toMatch(/^floodgate: first start: compiling the TypeScript sources into dist\/ \(about \d+ s, once\)$/);
      expect(distWhenAnnounced).toBe(false);
      expect(stderr).toMatch(/\nfloodgate: compiled in \d+(\.\d)? s\n/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
