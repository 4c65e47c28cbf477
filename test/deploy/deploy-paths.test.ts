// Each deploy path works as written (issue 28 section 3, issue 26 findings 8 and 9): the
// kustomize base is a single Redis with no example rules, the overlays' Redis wants a password
// and no image is a moving tag, the Envoy Gateway swap keeps the installed chart version, and
// the documents say what a platform team needs (your own build, NetworkPolicy per gateway,
// supported versions, the differences from the reference). Reads the repository only.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { trackChild } from '../harness/cleanup-registry';
import { freePort } from '../harness/free-port';
import { REDIS_SERVER_BIN, requireRedisServer } from '../harness/redis-binary';
import { respCommand } from '../harness/resp-client';
import { waitUntil } from '../harness/wait';
import { projectRoot } from '../../src/base/paths';
import { containerEnv, findOne, floodgateKit, loadRecordingReads, type Manifest } from '../helpers/floodgate-kit-checks';
import { kustomize } from '../helpers/kustomize-lite';

const path = (...parts: string[]): string => join(projectRoot, ...parts);
const read = (...parts: string[]): string => readFileSync(path(...parts), 'utf8');
const K8S = path('deploy', 'kubernetes');
const base = (): Manifest[] => kustomize(K8S);
const redisCluster = (): Manifest[] => kustomize(join(K8S, 'overlays', 'redis-cluster'));
const demo = (): Manifest[] => kustomize(join(K8S, 'overlays', 'demo'));

function containers(objects: readonly Manifest[]): { where: string; container: Manifest }[] {
  return objects
    .filter((o) => ['Deployment', 'StatefulSet', 'Job', 'DaemonSet'].includes(o['kind']))
    .flatMap((o) => {
      const spec = o['spec'].template.spec as Manifest;
      return [...((spec['initContainers'] ?? []) as Manifest[]), ...(spec['containers'] as Manifest[])].map((c) => ({
        where: `${o['kind']} ${o['metadata'].name}/${c['name']}`,
        container: c,
      }));
    });
}

const envFrom = (c: Manifest, name: string): Manifest | undefined => ((c['env'] ?? []) as Manifest[]).find((e) => e['name'] === name);

describe('kustomize base: one Redis, no example rules', () => {
  it('points at a single Redis (REDIS_TYPE=SINGLE, one host:port), both named in the floodgate-redis ConfigMap', () => {
    const { settings } = loadRecordingReads(containerEnv(floodgateKit(base())));
    expect(settings.redis?.type).toBe('SINGLE');
    expect(settings.redis?.url).toMatch(/^[\w.-]+:\d+$/);
    const env = floodgateKit(base()).container['env'] as Manifest[];
    for (const name of ['REDIS_TYPE', 'REDIS_URL'])
      expect(env.find((e) => e['name'] === name)?.['valueFrom']?.configMapKeyRef?.name, name).toBe('floodgate-redis');
  });

  it('ships no rules: the pods wait for a floodgate-rules ConfigMap you create; the example rules are the demo’s', () => {
    expect(base().filter((o) => o['kind'] === 'ConfigMap' && o['metadata'].name === 'floodgate-rules')).toEqual([]);
    const volume = (floodgateKit(base()).podSpec['volumes'] as Manifest[]).find((v) => v['name'] === 'rules');
    // Not optional: without the ConfigMap the pod does not start, rather than answer OK to everything.
    expect(volume?.['configMap']).toEqual({ name: 'floodgate-rules' });
    expect(findOne(demo(), 'ConfigMap', 'floodgate-rules')['data']).toHaveProperty(['edge.yaml']);
  });

  it('the redis-cluster overlay turns it into a cluster by its seed list', () => {
    const { settings } = loadRecordingReads(containerEnv(floodgateKit(redisCluster())));
    expect(settings.redis?.type).toBe('CLUSTER');
    expect(settings.redis?.url.split(',').length).toBeGreaterThanOrEqual(3);
  });
});

describe('the Redis the overlays start (issue 26 finding 9)', () => {
  const conf = (): string[] => (findOne(redisCluster(), 'ConfigMap', 'redis-cluster')['data']['redis.conf'] as string).split('\n');

  it('keeps protected mode and requires a password from the floodgate-redis Secret', () => {
    expect(conf().map((l) => l.trim())).not.toContain('protected-mode no');
    const redis = findOne(redisCluster(), 'StatefulSet', 'redis-cluster')['spec'].template.spec.containers[0] as Manifest;
    const command = (redis['command'] as string[]).join(' ');
    expect(command).toContain('--requirepass $(REDIS_PASSWORD)');
    expect(command).toContain('--masterauth $(REDIS_PASSWORD)');
    expect(envFrom(redis, 'REDIS_PASSWORD')?.['valueFrom']).toEqual({ secretKeyRef: { name: 'floodgate-redis', key: 'auth' } });
  });

  it('a real redis-server started as the StatefulSet starts it refuses a client without the password and answers one with it', async () => {
    requireRedisServer();
    const redis = findOne(redisCluster(), 'StatefulSet', 'redis-cluster')['spec'].template.spec.containers[0] as Manifest;
    const dir = mkdtempSync(join(tmpdir(), 'floodgate-overlay-redis-'));
    const port = await freePort({ withClusterBus: true });
    const password = 'overlay-test-password';
    // The ConfigMap's redis.conf as the pod reads it, moved to a loopback port and a temp dir.
    const podConf = conf()
      .map((l) => l.replace(/^port 6379$/, `port ${port}`).replace('/data/', `${dir}/`))
      .concat([`bind 127.0.0.1`, `dir ${dir}`, `logfile ${join(dir, 'redis.log')}`]);
    writeFileSync(join(dir, 'redis.conf'), podConf.join('\n') + '\n');
    // The container's command, with the variables Kubernetes expands.
    const [command, , ...args] = (redis['command'] as string[]).map((a) =>
      a.replace('$(REDIS_PASSWORD)', password).replace('$(POD_IP)', '127.0.0.1'),
    );
    expect(command).toBe('redis-server');
    const child = spawn(REDIS_SERVER_BIN, [join(dir, 'redis.conf'), ...args], { stdio: 'ignore' });
    trackChild(child);
    try {
      await waitUntil(
        'redis-server with the overlay configuration',
        () => respCommand('127.0.0.1', port, ['PING'], { password }).then((r) => r === 'PONG'),
        {
          timeoutMs: 10_000,
          diagnostics: () => readFileSync(join(dir, 'redis.log'), 'utf8').slice(-2000),
        },
      );
      await expect(respCommand('127.0.0.1', port, ['PING'])).rejects.toThrow(/NOAUTH/);
      await expect(respCommand('127.0.0.1', port, ['PING'], { password: 'wrong' })).rejects.toThrow(/WRONGPASS|invalid password/);
      expect(await respCommand('127.0.0.1', port, ['CONFIG', 'GET', 'masterauth'], { password })).toEqual(['masterauth', password]);
      expect(await respCommand('127.0.0.1', port, ['CONFIG', 'GET', 'protected-mode'], { password })).toEqual(['protected-mode', 'yes']);
    } finally {
      child.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('every redis-cli (probes, the cluster-create Job) authenticates with the same Secret, and floodgate does too', () => {
    for (const { where, container } of containers(redisCluster()).filter((c) => /redis/.test(c.where) && !/floodgate\//.test(c.where))) {
      expect(envFrom(container, 'REDISCLI_AUTH')?.['valueFrom'], where).toEqual({ secretKeyRef: { name: 'floodgate-redis', key: 'auth' } });
    }
    const auth = envFrom(floodgateKit(redisCluster()).container, 'REDIS_AUTH')?.['valueFrom']?.secretKeyRef as Manifest;
    expect([auth['name'], auth['key']]).toEqual(['floodgate-redis', 'auth']);
  });

  it('every image in the overlays is pinned by digest, with its exact version tag beside it', () => {
    for (const { where, container } of containers(demo()).filter((c) => !c.where.startsWith('Deployment floodgate/'))) {
      expect(container['image'], where).toMatch(/^[\w./-]+:v?\d+\.\d+\.\d+[\w.-]*@sha256:[0-9a-f]{64}$/);
    }
  });

  it('the demo’s Envoy is a current release (1.38), not v1.31-latest, and every Envoy image the documents name is that one', () => {
    const envoy = containers(demo()).find((c) => c.where.startsWith('Deployment envoy-gateway/'))?.container;
    expect(envoy?.['image']).toMatch(/^envoyproxy\/envoy:v1\.38\.\d+@sha256:/);
    for (const doc of [read('envoy', 'README.md'), read('deploy', 'README.md'), read('docs', 'supported-versions.md')]) {
      for (const m of doc.matchAll(/envoyproxy\/envoy:[^\s`'"]+/g)) expect(m[0]).toBe(envoy?.['image']);
    }
    expect(read('envoy', 'README.md')).toContain(envoy?.['image']);
  });
});

describe('documents', () => {
  it('every `helm upgrade` of Envoy Gateway pins --version to the installed chart', () => {
    const texts = [
      read('deploy', 'gateways', 'README.md'),
      read('deploy', 'gateways', 'envoy-gateway-values.yaml'),
      read('docs', 'migrating.md'),
    ];
    const commands = texts.flatMap((t) => [...t.matchAll(/helm upgrade eg [^\n]*(?:\\\n[^\n]*)*/g)].map((m) => m[0]));
    expect(commands.length).toBeGreaterThan(0);
    for (const command of commands) expect(command).toMatch(/--version "\$EG_VERSION"/);
    expect(read('deploy', 'gateways', 'README.md')).toMatch(/EG_VERSION=\$\(helm -n envoy-gateway-system get metadata eg/);
  });

  it('deploy/README.md says how to run your own build (kind load, a private registry) beside the image name', () => {
    const readme = read('deploy', 'README.md');
    expect(readme).toMatch(/### Your own build/);
    expect(readme).toContain('kind load docker-image');
    expect(readme).toContain('imagePullSecrets');
    expect(readme).toContain('kustomize edit set image floodgate=');
    expect(read('deploy', 'helm', 'floodgate', 'README.md')).toContain('--set image.repository=');
  });

  it('NetworkPolicy: an example for Envoy Gateway, Istio, plain Envoy and a Prometheus elsewhere, each by namespace name', () => {
    const readme = read('deploy', 'README.md');
    const section = readme.slice(readme.indexOf('### NetworkPolicy'));
    for (const heading of ['Envoy Gateway', 'Istio', 'Your own Envoy', 'Prometheus'])
      expect(section, heading).toMatch(new RegExp(`\\*\\*${heading}[^*]*\\*\\*`));
    expect(section).toContain('kubernetes.io/metadata.name');
  });

  it('the chart README says a sentinel URL needs its commas escaped in --set', () => {
    expect(read('deploy', 'helm', 'floodgate', 'README.md')).toContain("--set redis.url='mymaster\\,sentinel-0:26379\\,sentinel-1:26379'");
  });

  it('docs/supported-versions.md: Envoy, Envoy Gateway, Istio, Kubernetes, Redis, Node.js, each with how it is tested', () => {
    const doc = read('docs', 'supported-versions.md');
    const rows = doc.split('\n').filter((l) => l.startsWith('| ') && !l.startsWith('| ---'));
    for (const what of ['Envoy', 'Envoy Gateway', 'Istio', 'Kubernetes', 'Redis', 'Node.js']) {
      const row = rows.find((r) => r.split('|')[1]?.trim() === what);
      expect(row, what).toBeDefined();
      expect(row!.split('|').length, `${what}: version, how tested`).toBeGreaterThanOrEqual(5);
    }
    expect(read('README.md')).toContain('](docs/supported-versions.md)');
  });

  it('docs/differences.md lists the differences the install review found, each in one item', () => {
    const items = read('docs', 'differences.md').split(/\n- /);
    const item = (...words: string[]) => items.find((i) => words.every((w) => i.includes(w)));
    expect(item('should_rate_limit_error', 'invalid_request', 'service_error')).toBeDefined();
    expect(item('/rlconfig', 'unlimited')).toBeDefined();
    expect(item('/stats', 'pprof')).toBeDefined();
    expect(item('Prometheus', '9090', 'taken')).toBeDefined();
  });
});
