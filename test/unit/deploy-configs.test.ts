import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { compileRules } from '../../src/config/compile-rules';
import { parseRuleFile } from '../../src/config/parse-rule-file';
import type { RuleSet } from '../../src/config/rule-types';
import { projectRoot } from '../../src/base/paths';
import type { DescriptorEntry } from '../../src/domain/descriptor';
import { loadSettings } from '../../src/settings/settings';
import { SERVER_NODE_FLAGS } from '../helpers/server-process';
import { containerEnv, findOne, floodgateKit, floodgateKitChecks, loadRecordingReads } from '../helpers/floodgate-kit-checks';
import { kustomize } from '../helpers/kustomize-lite';

/**
 * Static checks of deploy/ and envoy/: the files parse, and they agree with the code and the
 * example rules. Nothing is started; this reads repository files only. A drift between the
 * manifests, the Envoy config, the settings and config/*.yaml fails here.
 */

// Parsed YAML is untyped by nature; the tests below assert the shape they rely on.
type Obj = Record<string, any>;

const repoPath = (...parts: string[]): string => join(projectRoot, ...parts);
const read = (...parts: string[]): string => readFileSync(repoPath(...parts), 'utf8');

function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...filesUnder(path));
    else out.push(path);
  }
  return out;
}

/** Every document of a YAML file, as plain data; fails on any parse error or warning. */
function yamlDocuments(path: string): Obj[] {
  const docs = parseAllDocuments(readFileSync(path, 'utf8'));
  if (!Array.isArray(docs)) throw new Error(`${path}: not a YAML stream`);
  const where = relative(projectRoot, path);
  for (const doc of docs) {
    expect(doc.errors.map((e) => `${where}: ${e.message}`)).toEqual([]);
    expect(doc.warnings.map((e) => `${where}: ${e.message}`)).toEqual([]);
  }
  return docs.map((d) => d.toJS() as Obj).filter((d) => d !== null);
}

function yamlDocument(...parts: string[]): Obj {
  const docs = yamlDocuments(repoPath(...parts));
  expect(docs).toHaveLength(1);
  return docs[0] as Obj;
}

/** The only key of a one-key object (a oneof in Envoy's YAML: `{remote_address: {}}`). */
function oneKey(o: Obj): [string, Obj] {
  const keys = Object.keys(o);
  if (keys.length !== 1) throw new Error(`expected exactly one key, got ${JSON.stringify(keys)}`);
  const key = keys[0] as string;
  return [key, (o[key] ?? {}) as Obj];
}

// ---- the example rules ----------------------------------------------------------------------

const RULE_FILES = readdirSync(repoPath('config'))
  .filter((n) => /\.ya?ml$/.test(n))
  .sort();

function compileExampleRules(files: ReadonlyMap<string, string>): RuleSet {
  const configs = [...files].map(([name, text]) => parseRuleFile(name, text));
  return compileRules(configs, { mergeDomainConfig: false });
}

const exampleRules = compileExampleRules(new Map(RULE_FILES.map((n) => [n, read('config', n)])));

// ---- Kubernetes ------------------------------------------------------------------------------

const K8S_DIR = repoPath('deploy', 'kubernetes', 'base');
const k8sFiles = readdirSync(K8S_DIR)
  .filter((n) => /\.ya?ml$/.test(n) && n !== 'kustomization.yaml')
  .sort();
/** The base as `kubectl apply -k deploy/kubernetes` renders it. */
const k8sObjects: Obj[] = kustomize(repoPath('deploy', 'kubernetes'));
const k8s = (kind: string, name: string): Obj => findOne(k8sObjects, kind, name);

// ---- Dockerfile ------------------------------------------------------------------------------

/** Dockerfile instructions (continuations joined, comments dropped), grouped by stage. */
function dockerStages(text: string): { from: string; instructions: string[] }[] {
  const lines = text.split('\n').filter((l) => !/^\s*#/.test(l));
  const joined: string[] = [];
  let current = '';
  for (const line of lines) {
    if (line.endsWith('\\')) {
      current += `${line.slice(0, -1).trim()} `;
      continue;
    }
    current += line.trim();
    if (current.trim() !== '') joined.push(current.trim());
    current = '';
  }
  const stages: { from: string; instructions: string[] }[] = [];
  // Global ARGs (before the first FROM) may only serve FROM lines; their defaults are substituted.
  const globalArgs = new Map<string, string>();
  for (const instruction of joined) {
    const arg = /^ARG\s+([A-Za-z_][A-Za-z0-9_]*)=(\S+)$/i.exec(instruction);
    if (/^FROM\s/i.test(instruction))
      stages.push({ from: instruction.replace(/\$\{(\w+)\}/g, (_, name: string) => globalArgs.get(name) ?? `\${${name}}`), instructions: [] });
    else if (stages.length > 0) stages[stages.length - 1]?.instructions.push(instruction);
    else if (arg) globalArgs.set(arg[1]!, arg[2]!);
    else throw new Error(`instruction before FROM: ${instruction}`);
  }
  return stages;
}

const dockerfile = dockerStages(read('deploy', 'Dockerfile'));
const runtimeStage = dockerfile[dockerfile.length - 1] as { from: string; instructions: string[] };
const dockerUser = (() => {
  const users = runtimeStage.instructions.filter((i) => /^USER\s/i.test(i));
  expect(users.length, 'the runtime stage must set USER').toBeGreaterThan(0);
  return (users[users.length - 1] as string).replace(/^USER\s+/i, '').trim();
})();

// ---- Envoy -----------------------------------------------------------------------------------

const ENVOY_FILES = ['envoy.yaml', 'envoy-tls.yaml'];

function envoyParts(config: Obj) {
  const listeners = config.static_resources.listeners as Obj[];
  const clusters = config.static_resources.clusters as Obj[];
  const hcms = listeners
    .flatMap((l) => (l.filter_chains as Obj[]).flatMap((c) => c.filters as Obj[]))
    .filter((f) => f.name === 'envoy.filters.network.http_connection_manager')
    .map((f) => f.typed_config as Obj);
  expect(hcms.length).toBeGreaterThan(0);
  const cluster = (name: string): Obj => {
    const found = clusters.filter((c) => c.name === name);
    if (found.length !== 1) throw new Error(`expected one cluster ${name}, found ${found.length}`);
    return found[0] as Obj;
  };
  return { listeners, clusters, hcms, cluster };
}

const HCM_TYPE = 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager';
const RATELIMIT_TYPE = 'type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit';
const ROUTER_TYPE = 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router';
const HTTP_OPTIONS_KEY = 'envoy.extensions.upstreams.http.v3.HttpProtocolOptions';
const UPSTREAM_TLS_TYPE = 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext';

/** Plausible values of a request header on a route (every shape the route match admits). */
function sampleHeader(header: string, match: Obj): string[] {
  if (header === ':path') {
    if (typeof match.path === 'string') return [match.path];
    if (typeof match.path_separated_prefix === 'string') return [match.path_separated_prefix, `${match.path_separated_prefix}/sample`];
    // `prefix` is a string prefix: `/api` also admits `/api` itself and `/apix`.
    if (typeof match.prefix === 'string') return [match.prefix, `${match.prefix}sample`, `${match.prefix}/sample`];
    throw new Error(`cannot make a sample :path for route match ${JSON.stringify(match)}`);
  }
  if (header === ':authority') return ['example.com'];
  return [`sample-${header}`];
}

/**
 * The descriptor entry one route action appends (Envoy's RateLimit.Action semantics), as the
 * alternatives it can take: sample values where Envoy would read the request. Unknown actions
 * fail loudly, so a new action type in envoy.yaml is taught here instead of going unchecked.
 */
function sampleEntries(action: Obj, match: Obj, routeCluster: string): DescriptorEntry[] {
  const [type, cfg] = oneKey(action);
  switch (type) {
    case 'remote_address':
      return [{ key: 'remote_address', value: '192.0.2.7' }];
    case 'generic_key':
      return [{ key: (cfg.descriptor_key as string | undefined) || 'generic_key', value: cfg.descriptor_value as string }];
    case 'request_headers':
      return sampleHeader(cfg.header_name as string, match).map((value) => ({ key: cfg.descriptor_key as string, value }));
    case 'header_value_match':
      return [{ key: (cfg.descriptor_key as string | undefined) || 'header_match', value: cfg.descriptor_value as string }];
    case 'destination_cluster':
      return [{ key: 'destination_cluster', value: routeCluster }];
    default:
      throw new Error(`route action ${type} is not understood by this test: add how it builds its descriptor entry`);
  }
}

/** Every combination of one alternative per position. */
function combinations<T>(alternatives: T[][]): T[][] {
  return alternatives.reduce<T[][]>((acc, options) => acc.flatMap((prefix) => options.map((o) => [...prefix, o])), [[]]);
}

interface SampleDescriptor {
  readonly route: string;
  readonly entries: DescriptorEntry[];
  readonly actions: string[];
}

/** Every descriptor the routes of one HTTP connection manager can send, with sample values. */
function sampleDescriptors(hcm: Obj, stage: number): SampleDescriptor[] {
  const out: SampleDescriptor[] = [];
  for (const vhost of hcm.route_config.virtual_hosts as Obj[]) {
    const fromVhost = (vhost.rate_limits ?? []) as Obj[];
    for (const route of vhost.routes as Obj[]) {
      const routeLimits = (route.route?.rate_limits ?? []) as Obj[];
      for (const limit of [...routeLimits, ...fromVhost]) {
        if ((limit.stage ?? 0) !== stage) continue;
        const actions = limit.actions as Obj[];
        const alternatives = actions.map((a) => sampleEntries(a, route.match as Obj, route.route?.cluster as string));
        for (const entries of combinations(alternatives)) {
          out.push({
            route: `${vhost.name}/${route.name ?? JSON.stringify(route.match)}`,
            entries,
            actions: actions.map((a) => oneKey(a)[0]),
          });
        }
      }
    }
  }
  return out;
}

function ratelimitFilter(hcm: Obj): Obj {
  const filters = hcm.http_filters as Obj[];
  const found = filters.filter((f) => f.name === 'envoy.filters.http.ratelimit');
  expect(found).toHaveLength(1);
  return (found[0] as Obj).typed_config as Obj;
}

// =============================================================================================

describe('deploy/ and envoy/ YAML', () => {
  // Helm templates are Go templates, not YAML: test/integration/helm-chart.test.ts renders and checks them.
  const yamlFiles = [...filesUnder(repoPath('deploy')), ...filesUnder(repoPath('envoy'))].filter(
    (p) => /\.ya?ml$/.test(p) && !/\/deploy\/helm\/[^/]+\/templates\//.test(p),
  );

  it('has the files this test checks', () => {
    const names = yamlFiles.map((p) => relative(projectRoot, p));
    expect(names).toEqual(expect.arrayContaining(['deploy/kubernetes/kustomization.yaml', 'envoy/envoy.yaml', 'envoy/envoy-tls.yaml']));
  });

  it.each(yamlFiles.map((p) => [relative(projectRoot, p), p]))('%s parses without errors or warnings', (_name, path) => {
    const docs = yamlDocuments(path);
    expect(docs.length).toBeGreaterThan(0);
    for (const doc of docs) expect(typeof doc).toBe('object');
  });
});

describe('deploy/Dockerfile', () => {
  // The Node.js line the tests run on (.node-version) is the one the image ships, pinned by digest.
  const nodeMajor = read('.node-version').trim().split('.')[0]!;
  const pinnedBase = new RegExp(`^FROM\\s+node:${nodeMajor}-slim@sha256:[0-9a-f]{64}(\\s|$)`, 'i');

  it('builds in a node slim builder of the tested Node.js line, pinned by digest, with npm ci and npm run build', () => {
    const builder = dockerfile.find((s) => /\sAS\s+builder$/i.test(s.from));
    expect(builder?.from, 'a `FROM node:<major>-slim@sha256:... AS builder` stage').toMatch(pinnedBase);
    const runs = builder?.instructions.filter((i) => /^RUN\s/i.test(i)).join('\n') ?? '';
    expect(runs).toMatch(/\bnpm ci\b/);
    expect(runs).toMatch(/\bnpm run build\b/);
  });

  it('runs node with the flags the tests run the server with (NODE_OPTIONS and /bin/ratelimit together), and so does npm start', () => {
    const env = runtimeStage.instructions.filter((i) => /^ENV\s/i.test(i)).join(' ');
    const nodeOptions = /NODE_OPTIONS="([^"]*)"/.exec(env)?.[1] ?? '';
    const shebangFlags = /^#!\/usr\/bin\/env -S node((?: --\S+)*)\n/.exec(read('bin', 'ratelimit'))?.[1] ?? '';
    expect([...nodeOptions.split(' '), ...shebangFlags.split(' ')].filter(Boolean).sort()).toEqual([...SERVER_NODE_FLAGS].sort());
    expect((JSON.parse(read('package.json')) as { scripts: { start: string } }).scripts.start).toContain(`node ${SERVER_NODE_FLAGS.join(' ')} `);
  });

  it('sets a NODE_OPTIONS node accepts (it refuses most V8 flags there, and the container would not start)', () => {
    const env = runtimeStage.instructions.filter((i) => /^ENV\s/i.test(i)).join(' ');
    const nodeOptions = /NODE_OPTIONS="([^"]*)"/.exec(env)?.[1];
    expect(nodeOptions).toBeDefined();
    const run = spawnSync(process.execPath, ['-e', '0'], { env: { ...process.env, NODE_OPTIONS: nodeOptions }, encoding: 'utf8' });
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
  });

  it('package.json asks for the Node.js line the tests run on and the image ships', () => {
    expect((JSON.parse(read('package.json')) as { engines: { node: string } }).engines.node).toBe(`>=${nodeMajor}`);
  });

  it('runs from the same pinned base with production dependencies only', () => {
    expect(runtimeStage.from).toMatch(pinnedBase);
    expect(runtimeStage.from.split(/\s+/)[1]).toBe(dockerfile[0]!.from.split(/\s+/)[1]);
    const runs = runtimeStage.instructions.filter((i) => /^RUN\s/i.test(i)).join('\n');
    expect(runs).toMatch(/\bnpm ci\b[^\n]*--omit=dev/);
  });

  it("starts from /bin/ratelimit, the reference image's command, linked to the shim in bin/ (issue 19 finding 1)", () => {
    const entrypoints = runtimeStage.instructions.filter((i) => /^ENTRYPOINT\s/i.test(i));
    expect(entrypoints).toHaveLength(1);
    expect(JSON.parse((entrypoints[0] as string).replace(/^ENTRYPOINT\s+/i, ''))).toEqual(['/bin/ratelimit']);
    expect(runtimeStage.instructions).toContain('COPY bin ./bin');
    expect(runtimeStage.instructions.some((i) => /^RUN\s+ln -s \/app\/bin\/ratelimit \/bin\/ratelimit$/.test(i))).toBe(true);
    // The shim is executable by anyone (Envoy Gateway runs the container as 65534:65534).
    expect(statSync(repoPath('bin', 'ratelimit')).mode & 0o555).toBe(0o555);
    expect(read('bin', 'ratelimit').startsWith('#!/usr/bin/env -S node ')).toBe(true);
  });

  it('copies what the service reads at run time: dist/, proto/, lua/, package*.json', () => {
    const copies = runtimeStage.instructions.filter((i) => /^COPY\s/i.test(i));
    const has = (re: RegExp) => copies.some((c) => re.test(c));
    expect(has(/^COPY\s+--from=builder\s+\/app\/dist\s/i), 'COPY --from=builder /app/dist').toBe(true);
    expect(has(/^COPY\s+proto\s/i), 'COPY proto').toBe(true);
    expect(has(/^COPY\s+lua\s/i), 'COPY lua').toBe(true);
    expect(has(/^COPY\s+package\.json\s+package-lock\.json\s/i), 'COPY package.json package-lock.json').toBe(true);
    // src/base/paths.ts resolves proto/ and lua/ next to package.json; they must exist to be copied.
    expect(statSync(repoPath('proto')).isDirectory()).toBe(true);
    expect(statSync(repoPath('lua')).isDirectory()).toBe(true);
  });

  it('runs as a numeric non-root user (so runAsNonRoot can verify it)', () => {
    const [uid, gid] = dockerUser.split(':');
    expect(uid).toMatch(/^\d+$/);
    expect(Number(uid)).toBeGreaterThan(0);
    if (gid !== undefined) expect(Number(gid)).toBeGreaterThan(0);
  });

  it('exposes the default ports and sets the default RUNTIME_ROOT', () => {
    const defaults = loadSettings({});
    const exposed = runtimeStage.instructions
      .filter((i) => /^EXPOSE\s/i.test(i))
      .flatMap((i) => i.replace(/^EXPOSE\s+/i, '').split(/\s+/))
      .map((p) => Number(p.replace(/\/tcp$/, '')));
    expect(exposed.sort()).toEqual([defaults.port, defaults.grpcPort, defaults.debugPort, defaults.prometheusPort].sort());
    const env = runtimeStage.instructions.filter((i) => /^ENV\s/i.test(i)).join(' ');
    expect(env).toMatch(new RegExp(`\\bRUNTIME_ROOT=${defaults.runtimeRoot.replace(/\//g, '\\/')}(\\s|$)`));
  });

  it('does not keep the sources it needs out of the build context', () => {
    const ignored = read('deploy', 'Dockerfile.dockerignore')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '' && !l.startsWith('#'));
    for (const needed of ['src', 'proto', 'lua', 'package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.build.json']) {
      expect(ignored.filter((p) => p === needed || p === `${needed}/` || p === `/${needed}` || p === '*' || p === '**')).toEqual([]);
    }
  });
});

describe('deploy/kubernetes', () => {
  it('kustomization.yaml lists every manifest, and only existing ones', () => {
    const kustomization = yamlDocument('deploy', 'kubernetes', 'base', 'kustomization.yaml');
    expect(kustomization.kind).toBe('Kustomization');
    expect([...(kustomization.resources as string[])].sort()).toEqual(k8sFiles);
  });

  // The checks every rendering of the kit passes (the Helm chart's too).
  floodgateKitChecks(() => k8sObjects, { imageUser: dockerUser });

  describe('Deployment environment', () => {
    const env = containerEnv(floodgateKit(k8sObjects));

    it('sets the Redis, failure-mode, header, metrics and orphan-scan variables', () => {
      expect(Object.keys(env)).toEqual(
        expect.arrayContaining([
          'REDIS_TYPE',
          'REDIS_URL',
          'BACKEND_FAILURE_MODE',
          'LIMIT_RESPONSE_HEADERS_ENABLED',
          'USE_PROMETHEUS',
          'ORPHAN_SCAN_INTERVAL',
        ]),
      );
    });

    it('points at one Redis (the redis-cluster overlay makes it a cluster), Prometheus on, rules watched through RUNTIME_ROOT', () => {
      const { settings } = loadRecordingReads(env);
      expect(settings.backendType).toBe('redis');
      expect(settings.redis?.type).toBe('SINGLE');
      expect(settings.redis?.url).toMatch(/^[\w.-]+:\d+$/);
      expect(settings.usePrometheus).toBe(true);
      expect(settings.runtimeWatchRoot).toBe(true);
    });

    it('ports are the defaults Envoy configs and the Services name', () => {
      const { settings } = loadRecordingReads(env);
      expect([settings.grpcPort, settings.port, settings.prometheusPort]).toEqual([8081, 8080, 9090]);
      expect(
        k8s('Service', 'floodgate')
          .spec.ports.map((p: Obj) => p.name)
          .sort(),
      ).toEqual(['grpc', 'http', 'metrics']);
      expect(k8s('Service', 'floodgate-headless').spec.clusterIP).toBe('None');
    });
  });

  // The base ships no rules; the demo overlay ships the example rules.
  describe('the demo overlay’s rules ConfigMap', () => {
    const configMap = findOne(kustomize(repoPath('deploy', 'kubernetes', 'overlays', 'demo')), 'ConfigMap', 'floodgate-rules');
    const data = configMap.data as Record<string, string>;

    it('holds exactly the files of config/, byte for byte', () => {
      expect(Object.keys(data).sort()).toEqual(RULE_FILES);
      for (const name of RULE_FILES) expect(data[name], `${name} differs from config/${name}`).toBe(read('config', name));
    });

    it('parses and compiles with floodgate’s own rule loader', () => {
      const rules = compileExampleRules(new Map(Object.entries(data)));
      expect(rules.domainCount).toBe(RULE_FILES.length);
      expect(rules.rules.map((r) => r.fullKey)).toEqual(exampleRules.rules.map((r) => r.fullKey));
    });
  });
});

describe.each(ENVOY_FILES)('envoy/%s', (file) => {
  const config = yamlDocument('envoy', file);
  const { hcms, clusters, cluster } = envoyParts(config);
  const defaults = loadSettings({});

  it('has a listener with an HTTP connection manager: rate limit filter, then the router last', () => {
    for (const hcm of hcms) {
      expect(hcm['@type']).toBe(HCM_TYPE);
      const filters = hcm.http_filters as Obj[];
      const names = filters.map((f) => f.name as string);
      expect(names[names.length - 1]).toBe('envoy.filters.http.router');
      expect(filters[filters.length - 1]?.typed_config?.['@type']).toBe(ROUTER_TYPE);
      expect(names.indexOf('envoy.filters.http.ratelimit')).toBeGreaterThanOrEqual(0);
      expect(names.indexOf('envoy.filters.http.ratelimit')).toBeLessThan(names.length - 1);
    }
  });

  it('configures the ratelimit filter as floodgate expects', () => {
    for (const hcm of hcms) {
      const rl = ratelimitFilter(hcm);
      expect(rl['@type']).toBe(RATELIMIT_TYPE);
      expect(exampleRules.hasDomain(rl.domain as string), `domain ${rl.domain} is in config/`).toBe(true);
      expect(rl.failure_mode_deny).toBe(false);
      expect(rl.timeout).toBe('0.02s');
      expect(rl.enable_x_ratelimit_headers).toBe('DRAFT_VERSION_03');
      expect(rl.rate_limit_service.transport_api_version).toBe('V3');
      expect(rl.rate_limit_service.grpc_service.envoy_grpc.cluster_name).toBe('floodgate');
    }
  });

  it('reaches floodgate over HTTP/2 on its gRPC port, health-checking service "ratelimit"', () => {
    const floodgate = cluster('floodgate');
    expect(floodgate.type).toBe('STRICT_DNS');
    const options = floodgate.typed_extension_protocol_options?.[HTTP_OPTIONS_KEY] as Obj;
    expect(options['@type']).toBe(`type.googleapis.com/${HTTP_OPTIONS_KEY}`);
    expect(options.explicit_http_config).toHaveProperty('http2_protocol_options');
    const endpoints = (floodgate.load_assignment.endpoints as Obj[]).flatMap((e) => e.lb_endpoints as Obj[]);
    expect(endpoints.length).toBeGreaterThan(0);
    for (const e of endpoints) expect(e.endpoint.address.socket_address.port_value).toBe(defaults.grpcPort);
    const checks = floodgate.health_checks as Obj[];
    expect(checks).toHaveLength(1);
    // Envoy rejects a health check without these four.
    for (const field of ['timeout', 'interval', 'unhealthy_threshold', 'healthy_threshold']) expect(checks[0]).toHaveProperty(field);
    expect(checks[0]?.grpc_health_check).toEqual({ service_name: 'ratelimit' });
  });

  it('routes only to clusters that exist', () => {
    const names = new Set(clusters.map((c) => c.name as string));
    for (const hcm of hcms) {
      for (const vhost of hcm.route_config.virtual_hosts as Obj[]) {
        for (const route of vhost.routes as Obj[])
          if (route.route) expect(names.has(route.route.cluster as string), route.route.cluster).toBe(true);
      }
    }
  });

  it('every descriptor the route actions produce has a limit in the domain', () => {
    const seen: SampleDescriptor[] = [];
    for (const hcm of hcms) {
      const rl = ratelimitFilter(hcm);
      const domain = rl.domain as string;
      for (const descriptor of sampleDescriptors(hcm, (rl.stage as number | undefined) ?? 0)) {
        seen.push(descriptor);
        const what = `${descriptor.route}: ${JSON.stringify(descriptor.entries)}`;
        const match = exampleRules.match(domain, descriptor.entries);
        expect(match?.rule, `no rule with a limit for ${what}`).toBeDefined();
        expect(match?.rule?.unlimited, `${what} matches an unlimited rule`).toBe(false);
      }
    }
    // The examples the README documents are all there.
    const keyLists = seen.map((d) => d.entries.map((e) => e.key).join(','));
    expect(keyLists).toEqual(expect.arrayContaining(['api_key', 'remote_address,path']));
    expect(seen.some((d) => d.actions.includes('generic_key'))).toBe(true);
    expect(seen.some((d) => d.actions.includes('request_headers') && d.entries.some((e) => e.key === 'path'))).toBe(true);
  });
});

describe('envoy/envoy-tls.yaml', () => {
  it('is envoy.yaml plus TLS with ALPN h2 on the floodgate cluster, nothing else', () => {
    const plain = yamlDocument('envoy', 'envoy.yaml');
    const tls = yamlDocument('envoy', 'envoy-tls.yaml');
    const floodgate = envoyParts(tls).cluster('floodgate');
    const socket = floodgate.transport_socket as Obj;
    expect(socket.name).toBe('envoy.transport_sockets.tls');
    expect(socket.typed_config['@type']).toBe(UPSTREAM_TLS_TYPE);
    expect(socket.typed_config.common_tls_context.alpn_protocols).toEqual(['h2']);
    expect(envoyParts(plain).cluster('floodgate').transport_socket).toBeUndefined();
    delete floodgate.transport_socket;
    expect(tls).toEqual(plain);
  });
});
