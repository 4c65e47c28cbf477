// Issue 19, finding 4: `floodgate check` and `serve` load the same rule tree, subdirectories
// included, and a reload sees a change in a subdirectory. The built server (`npm run build`).
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../../src/base/paths';
import { within } from '../harness/wait';
import { runCli } from '../helpers/run-cli';
import { spawnServerWithEnv, type ServerProcess } from '../helpers/server-process';

const BUILD_TREES = join(projectRoot, 'test/fixtures/config/rule-trees/build-trees.sh');

async function servedDomains(server: ServerProcess): Promise<string[]> {
  const text = await (await fetch(`http://127.0.0.1:${server.debugPort}/rlconfig`)).text();
  return [
    ...new Set(
      text
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => line.slice(0, line.indexOf('.'))),
    ),
  ].sort();
}

function checkedDomains(stdout: string): string[] {
  return stdout
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => line.slice(0, line.indexOf(':')))
    .sort();
}

describe('floodgate check and serve load the same rule tree', () => {
  let base: string;
  const servers: ServerProcess[] = [];

  beforeAll(async () => {
    base = await mkdtemp(join(tmpdir(), 'floodgate-tree-e2e-'));
    execFileSync('bash', [BUILD_TREES, base]);
  });

  afterAll(async () => {
    for (const server of servers) server.cleanup();
    await rm(base, { recursive: true, force: true });
  });

  it.each([
    ['mixed', 'true', 'true', ['a', 'configd', 'linkfile', 'sibling', 'team_a', 'team_b_deep']],
    ['mixed', 'false', 'false', ['a', 'dotdir', 'hidden', 'linkfile', 'subdotfile', 'team_a', 'team_b_deep']],
    // A ConfigMap with the reference's default RUNTIME_IGNOREDOTFILES=false: each file once.
    ['configmap', 'true', 'false', ['cm_a', 'cm_b']],
  ] as const)(
    '%s, RUNTIME_WATCH_ROOT=%s, RUNTIME_IGNOREDOTFILES=%s',
    async (tree, watchRoot, ignoreDotFiles, expected) => {
      const env = {
        RUNTIME_ROOT: join(base, tree),
        RUNTIME_SUBDIRECTORY: 'ratelimit',
        RUNTIME_APPDIRECTORY: 'config',
        RUNTIME_WATCH_ROOT: watchRoot,
        RUNTIME_IGNOREDOTFILES: ignoreDotFiles,
      };
      const check = await runCli(['check'], env);
      expect(check.stderr).toBe('');
      expect(checkedDomains(check.stdout)).toEqual(expected);
      const server = await spawnServerWithEnv({
        ...env,
        HOST: '127.0.0.1',
        PORT: '0',
        GRPC_HOST: '127.0.0.1',
        GRPC_PORT: '0',
        DEBUG_PORT: '0',
        USE_PROMETHEUS: 'false',
        USE_STATSD: 'false',
        LOG_LEVEL: 'ERROR',
      });
      servers.push(server);
      expect(await servedDomains(server)).toEqual(expected);
    },
    60_000,
  );

  it('a file added in a new subdirectory is served after a reload', async () => {
    const root = join(base, 'reload');
    await mkdir(join(root, 'ratelimit', 'config'), { recursive: true });
    await writeFile(
      join(root, 'ratelimit', 'config', 'a.yaml'),
      'domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 1}\n',
    );
    const server = await spawnServerWithEnv({
      RUNTIME_ROOT: root,
      RUNTIME_SUBDIRECTORY: 'ratelimit',
      HOST: '127.0.0.1',
      PORT: '0',
      GRPC_HOST: '127.0.0.1',
      GRPC_PORT: '0',
      DEBUG_PORT: '0',
      USE_PROMETHEUS: 'false',
      USE_STATSD: 'false',
      LOG_LEVEL: 'ERROR',
    });
    servers.push(server);
    expect(await servedDomains(server)).toEqual(['a']);
    await mkdir(join(root, 'ratelimit', 'config', 'team-b', 'deep'), { recursive: true });
    await writeFile(
      join(root, 'ratelimit', 'config', 'team-b', 'deep', 'y.yaml'),
      'domain: deep\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 1}\n',
    );
    let domains: string[] = [];
    await within(
      2000,
      async () => {
        domains = await servedDomains(server);
        return domains.includes('deep');
      },
      'the new subdirectory served',
    );
    expect(domains).toEqual(['a', 'deep']);
  }, 30_000);
});
