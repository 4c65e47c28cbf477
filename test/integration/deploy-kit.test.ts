// The Kubernetes kit: every manifest of the base, the overlays (redis-cluster, demo), the
// ServiceMonitor component and the gateway examples is validated against the Kubernetes
// (and Prometheus Operator, Istio) JSON schemas of kubernetes-models, offline; then the pieces
// are checked to fit together: selectors, ports, the Redis seed list, Envoy's cluster and
// descriptors against floodgate's own rule loader.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { compileRules } from '../../src/config/compile-rules';
import { parseRuleFile } from '../../src/config/parse-rule-file';
import { projectRoot } from '../../src/base/paths';
import { findOne, loadRecordingReads, schemaClasses, selects, type Manifest } from '../helpers/floodgate-kit-checks';
import { kustomize } from '../helpers/kustomize-lite';

const K8S = join(projectRoot, 'deploy', 'kubernetes');
const RENDERED: Record<string, Manifest[]> = {
  base: kustomize(K8S),
  'overlays/redis-cluster': kustomize(join(K8S, 'overlays', 'redis-cluster')),
  'overlays/demo': kustomize(join(K8S, 'overlays', 'demo')),
  'components/servicemonitor': kustomize(join(K8S, 'components', 'servicemonitor')),
};
const GATEWAYS = join(projectRoot, 'deploy', 'gateways');
const ISTIO = parseAllDocuments(readFileSync(join(GATEWAYS, 'istio-envoyfilter.yaml'), 'utf8')).map((d) => d.toJS() as Manifest);

const find = findOne;

function podTemplates(objects: readonly Manifest[]): Manifest[] {
  return objects.filter((o) => ['Deployment', 'StatefulSet', 'Job'].includes(o['kind'])).map((o) => o['spec'].template);
}

/**
 * The one JSONPatch `add` the floodgate EnvoyPatchPolicy makes to a Listener, applied as Envoy
 * Gateway applies it (internal/utils/jsonpatch/patch.go: `jsonPath` located first, `path`
 * appended to each location, RFC 6902 add, which inserts into an array before the index).
 * Only the JSONPath form used here is understood: `..<key>[?(@.name=='<name>')]`.
 */
function applyListenerAdd(listener: Manifest, operation: Manifest): Manifest {
  const doc = structuredClone(listener);
  const pointers: string[] = [];
  if (operation['jsonPath'] !== undefined) {
    const m = /^\.\.(\w+)\[\?\(@\.name\s*==\s*'([^']+)'\)\]$/.exec(operation['jsonPath'] as string);
    if (!m) throw new Error(`jsonPath ${operation['jsonPath']} is not understood by this test`);
    const [, key, name] = m as unknown as [string, string, string];
    const walk = (node: unknown, at: string): void => {
      if (Array.isArray(node)) node.forEach((v, i) => walk(v, `${at}/${i}`));
      else if (node !== null && typeof node === 'object') {
        for (const [k, v] of Object.entries(node)) {
          if (k === key && Array.isArray(v)) v.forEach((f: Manifest, i) => f?.['name'] === name && pointers.push(`${at}/${k}/${i}`));
          walk(v, `${at}/${k}`);
        }
      }
    };
    walk(doc, '');
    if (pointers.length === 0) throw new Error(`jsonPath ${operation['jsonPath']} finds nothing (Envoy Gateway refuses such a patch)`);
  } else {
    pointers.push(operation['path'] as string);
  }
  expect(operation['op']).toBe('add');
  for (const pointer of pointers.map((p) => (operation['jsonPath'] !== undefined && operation['path'] ? `${p}/${operation['path']}` : p))) {
    const parts = pointer.split('/').slice(1);
    const last = parts.pop() as string;
    const parent = parts.reduce<any>((node, part) => node[Array.isArray(node) ? Number(part) : part], doc);
    if (Array.isArray(parent)) parent.splice(last === '-' ? parent.length : Number(last), 0, structuredClone(operation['value']));
    else parent[last] = structuredClone(operation['value']);
  }
  return doc;
}

/** The HTTP filters of a Gateway listener as Envoy Gateway generates it with authentication on (JWT, external auth). */
const EG_LISTENER: Manifest = {
  name: 'default/eg/http',
  default_filter_chain: {
    filters: [
      {
        name: 'envoy.filters.network.http_connection_manager',
        typed_config: {
          '@type': 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager',
          http_filters: [
            { name: 'envoy.filters.http.cors' },
            { name: 'envoy.filters.http.jwt_authn' },
            { name: 'envoy.filters.http.ext_authz' },
            { name: 'envoy.filters.http.router' },
          ],
        },
      },
    ],
  },
};

/**
 * The environment of the rate-limit Deployment Envoy Gateway generates (recorded from
 * envoyproxy/gateway internal/infrastructure/kubernetes/ratelimit/testdata/deployments/default.yaml
 * at d32f2829, v1.9 line; REDIS_URL is the value of rateLimit.backend.redis.url). Swapping the
 * image leaves all of it in place.
 */
const ENVOY_GATEWAY_RATELIMIT_ENV: Record<string, string> = {
  RUNTIME_ROOT: '/data',
  RUNTIME_SUBDIRECTORY: 'ratelimit',
  RUNTIME_IGNOREDOTFILES: 'true',
  RUNTIME_WATCH_ROOT: 'false',
  LOG_LEVEL: 'info',
  USE_STATSD: 'false',
  CONFIG_TYPE: 'GRPC_XDS_SOTW',
  CONFIG_GRPC_XDS_SERVER_URL: 'envoy-gateway:18001',
  CONFIG_GRPC_XDS_NODE_ID: 'envoy-ratelimit',
  GRPC_SERVER_USE_TLS: 'true',
  GRPC_SERVER_TLS_CERT: '/certs/tls.crt',
  GRPC_SERVER_TLS_KEY: '/certs/tls.key',
  GRPC_SERVER_TLS_CA_CERT: '/certs/ca.crt',
  CONFIG_GRPC_XDS_SERVER_USE_TLS: 'true',
  CONFIG_GRPC_XDS_CLIENT_TLS_CERT: '/certs/tls.crt',
  CONFIG_GRPC_XDS_CLIENT_TLS_KEY: '/certs/tls.key',
  CONFIG_GRPC_XDS_SERVER_TLS_CACERT: '/certs/ca.crt',
  FORCE_START_WITHOUT_INITIAL_CONFIG: 'true',
  REDIS_SOCKET_TYPE: 'tcp',
  REDIS_URL: 'redis.redis-system.svc.cluster.local:6379',
  USE_PROMETHEUS: 'true',
  PROMETHEUS_ADDR: ':19001',
  PROMETHEUS_MAPPER_YAML: '/etc/statsd-exporter/conf.yaml',
};
/** api/v1alpha1/shared_types.go, KubernetesContainerSpec.Image: the CEL rule Envoy Gateway validates an image with. */
const ENVOY_GATEWAY_IMAGE_RULE = /^[a-zA-Z0-9._-]+(:[0-9]+)?(\/[a-zA-Z0-9._/-]+)?(:[a-zA-Z0-9._-]+)?(@sha256:[a-z0-9]+)?$/;

describe('schemas (kubernetes-models, offline)', () => {
  const all = [
    ...Object.entries(RENDERED).flatMap(([name, objects]) => objects.map((o) => [name, o] as const)),
    ...ISTIO.map((o) => ['gateways/istio', o] as const),
  ];
  it.each(all.map(([where, o]) => [`${where}: ${o['kind']} ${o['metadata']?.name}`, o]))('%s validates', async (_name, o) => {
    const classes = await schemaClasses();
    const cls = classes.get(`${o['apiVersion']}/${o['kind']}`);
    expect(cls, `no schema for ${o['apiVersion']}/${o['kind']}`).toBeDefined();
    expect(() => new cls!(o).validate()).not.toThrow();
  });

  it('the validator does reject a broken manifest', async () => {
    const classes = await schemaClasses();
    const deployment = structuredClone(find(RENDERED['base']!, 'Deployment', 'floodgate'));
    deployment['spec'].template.spec.containers[0].ports[0].containerPort = 'grpc-port';
    expect(() => new (classes.get('apps/v1/Deployment')!)(deployment).validate()).toThrow();
    const monitor = structuredClone(find(RENDERED['components/servicemonitor']!, 'ServiceMonitor', 'floodgate'));
    monitor['spec'].endpoints = 'metrics';
    expect(() => new (classes.get('monitoring.coreos.com/v1/ServiceMonitor')!)(monitor).validate()).toThrow();
  });
});

describe('overlays/redis-cluster', () => {
  const objects = RENDERED['overlays/redis-cluster']!;
  const statefulSet = find(objects, 'StatefulSet', 'redis-cluster');

  it('six Redis nodes and a Job that joins six', () => {
    expect(statefulSet['spec'].replicas).toBe(6);
    const script = find(objects, 'Job', 'redis-cluster-create')['spec'].template.spec.containers[0].command.join('\n') as string;
    expect(script).toContain('for i in 0 1 2 3 4 5; do');
    expect(script).toContain('--cluster-replicas 1');
    const conf = (find(objects, 'ConfigMap', 'redis-cluster')['data']['redis.conf'] as string).split('\n');
    expect(conf).toContain('cluster-enabled yes');
    expect(conf).toContain('cluster-config-file /data/nodes.conf');
  });

  it('floodgate is pointed at pods of that StatefulSet, through its headless Service', () => {
    const url = find(objects, 'ConfigMap', 'floodgate-redis')['data'].url as string;
    const service = find(objects, 'Service', statefulSet['spec'].serviceName);
    expect(service['spec'].clusterIP).toBe('None');
    expect(selects(service['spec'].selector, statefulSet['spec'].template.metadata.labels)).toBe(true);
    const seeds = url.split(',');
    expect(seeds.length).toBeGreaterThanOrEqual(3);
    for (const seed of seeds) {
      const m = /^redis-cluster-(\d+)\.redis-cluster:6379$/.exec(seed);
      expect(m, seed).not.toBeNull();
      expect(Number(m![1])).toBeLessThan(6);
    }
    expect(find(objects, 'ConfigMap', 'floodgate-redis')['data'].type).toBe('CLUSTER');
  });
});

describe('overlays/demo', () => {
  const objects = RENDERED['overlays/demo']!;
  const envoyConfig = parse(find(objects, 'ConfigMap', 'envoy-gateway')['data']['envoy.yaml'] as string) as Manifest;

  it('holds floodgate, the example rules, the Redis Cluster and the Envoy gateway', () => {
    for (const [kind, name] of [
      ['ConfigMap', 'floodgate-rules'],
      ['Deployment', 'floodgate'],
      ['StatefulSet', 'redis-cluster'],
      ['Job', 'redis-cluster-create'],
      ['Deployment', 'envoy-gateway'],
      ['Service', 'envoy-gateway'],
    ]) {
      expect(() => find(objects, kind!, name!)).not.toThrow();
    }
  });

  it("floodgate's Services select only floodgate's pods", () => {
    const floodgatePod = find(objects, 'Deployment', 'floodgate')['spec'].template.metadata.labels;
    for (const name of ['floodgate', 'floodgate-headless']) {
      const selector = find(objects, 'Service', name)['spec'].selector;
      const matched = podTemplates(objects).filter((t) => selects(selector, t.metadata.labels));
      expect(
        matched.map((t) => t.metadata.labels),
        name,
      ).toEqual([floodgatePod]);
    }
  });

  it("Envoy reaches floodgate's headless Service over HTTP/2, and the NetworkPolicy lets it", () => {
    const cluster = (envoyConfig['static_resources'].clusters as Manifest[]).find((c) => c['name'] === 'floodgate')!;
    const address = cluster['load_assignment'].endpoints[0].lb_endpoints[0].endpoint.address.socket_address;
    const service = find(objects, 'Service', address.address);
    expect(service['spec'].clusterIP).toBe('None');
    expect((service['spec'].ports as Manifest[]).map((p) => p['port'])).toContain(address.port_value);
    expect(
      cluster['typed_extension_protocol_options']['envoy.extensions.upstreams.http.v3.HttpProtocolOptions'].explicit_http_config,
    ).toHaveProperty('http2_protocol_options');
    const policy = find(objects, 'NetworkPolicy', 'floodgate');
    const gatewayPod = find(objects, 'Deployment', 'envoy-gateway')['spec'].template.metadata.labels;
    const grpcRule = (policy['spec'].ingress as Manifest[]).find((r) =>
      (r['ports'] as Manifest[]).some((p) => p['port'] === address.port_value),
    )!;
    expect((grpcRule['from'] as Manifest[]).some((f) => selects(f['podSelector'].matchLabels, gatewayPod))).toBe(true);
  });

  it("every descriptor Envoy's routes produce has a rule in the domain it asks for (floodgate's own loader)", () => {
    const listener = (envoyConfig['static_resources'].listeners as Manifest[]).find((l) => l['name'] === 'edge')!;
    const hcm = listener['filter_chains'][0].filters[0].typed_config;
    const filter = (hcm.http_filters as Manifest[]).find((f) => f['name'] === 'envoy.filters.http.ratelimit')!;
    const domain = filter['typed_config'].domain as string;
    const rulesData = find(objects, 'ConfigMap', 'floodgate-rules')['data'] as Record<string, string>;
    const rules = compileRules(
      Object.entries(rulesData).map(([name, text]) => parseRuleFile(name, text)),
      { mergeDomainConfig: false },
    );
    expect(rules.hasDomain(domain)).toBe(true);
    const routes = hcm.route_config.virtual_hosts[0].routes as Manifest[];
    let checked = 0;
    for (const route of routes) {
      for (const rl of (route['route']?.rate_limits ?? []) as Manifest[]) {
        const entries = (rl['actions'] as Manifest[]).map((a) => {
          if ('remote_address' in a) return { key: 'remote_address', value: '10.0.0.1' };
          if ('generic_key' in a) return { key: a['generic_key'].descriptor_key, value: a['generic_key'].descriptor_value };
          return { key: a['request_headers'].descriptor_key, value: 'some-value' };
        });
        expect(rules.match(domain, entries)?.rule, JSON.stringify(entries)).toBeDefined();
        checked++;
      }
    }
    expect(checked).toBeGreaterThanOrEqual(2);
  });
});

describe('components/servicemonitor', () => {
  it("scrapes the floodgate Service's metrics port", () => {
    const monitor = find(RENDERED['components/servicemonitor']!, 'ServiceMonitor', 'floodgate');
    const service = find(RENDERED['base']!, 'Service', 'floodgate');
    expect(selects(monitor['spec'].selector.matchLabels, service['metadata'].labels)).toBe(true);
    const ports = (service['spec'].ports as Manifest[]).map((p) => p['name']);
    for (const endpoint of monitor['spec'].endpoints as Manifest[]) expect(ports).toContain(endpoint['port']);
    expect(
      find(RENDERED['base']!, 'Deployment', 'floodgate')['spec'].template.spec.containers[0].ports.find((p: Manifest) => p['name'] === 'metrics')
        .containerPort,
    ).toBe(9090);
  });
});

describe('gateways', () => {
  it('Istio: the filter asks floodgate on its gRPC port in the domain of the example rules', () => {
    const filter = ISTIO.find((o) => o['metadata'].name === 'floodgate-ratelimit')!['spec'].configPatches[0].patch.value;
    expect(filter.name).toBe('envoy.filters.http.ratelimit');
    expect(filter.typed_config.domain).toBe('edge');
    expect(filter.typed_config.rate_limit_service.grpc_service.envoy_grpc.cluster_name).toMatch(
      /^outbound\|8081\|\|floodgate\.[a-z0-9-]+\.svc\.cluster\.local$/,
    );
  });

  it('Envoy Gateway: the patch adds a floodgate cluster on the headless Service and the filter', () => {
    // No published schema for EnvoyPatchPolicy in kubernetes-models: checked field by field.
    const policy = parse(readFileSync(join(GATEWAYS, 'envoy-gateway-patchpolicy.yaml'), 'utf8')) as Manifest;
    expect(policy['apiVersion']).toBe('gateway.envoyproxy.io/v1alpha1');
    expect(policy['kind']).toBe('EnvoyPatchPolicy');
    expect(policy['spec'].type).toBe('JSONPatch');
    const patches = policy['spec'].jsonPatches as Manifest[];
    const cluster = patches.find((p) => p['type'].endsWith('Cluster'))!['operation'].value;
    expect(cluster.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address).toEqual({
      address: 'floodgate-headless.rl.svc.cluster.local',
      port_value: 8081,
    });
    const filter = patches.find((p) => p['type'].endsWith('Listener'))!['operation'].value;
    expect(filter.typed_config.domain).toBe('edge');
    expect(filter.typed_config.rate_limit_service.grpc_service.envoy_grpc.cluster_name).toBe(cluster.name);
  });

  it('Envoy Gateway swap: the EnvoyGateway values set the rate-limit image and Redis, and floodgate accepts the environment Envoy Gateway generates', () => {
    const values = parse(readFileSync(join(GATEWAYS, 'envoy-gateway-values.yaml'), 'utf8')) as Manifest;
    const eg = values['config'].envoyGateway;
    expect(eg.rateLimit.backend.type).toBe('Redis');
    expect(eg.rateLimit.backend.redis.url).toBe(ENVOY_GATEWAY_RATELIMIT_ENV['REDIS_URL']);
    expect(eg.provider.type).toBe('Kubernetes');
    const container = eg.provider.kubernetes.rateLimitDeployment.container;
    expect(container.image).toMatch(ENVOY_GATEWAY_IMAGE_RULE);
    expect(container.image).toMatch(/^ghcr\.io\/floodgate-rls\/floodgate:\d+\.\d+\.\d+$/);
    // Only the fields KubernetesContainerSpec has (there is no command: /bin/ratelimit stays).
    for (const key of Object.keys(container))
      expect(['env', 'resources', 'securityContext', 'image', 'imageRepository', 'volumeMounts']).toContain(key);
    // Envoy Gateway merges container.env into its own by name.
    const env = { ...ENVOY_GATEWAY_RATELIMIT_ENV };
    for (const e of container.env as { name: string; value: string }[]) env[e.name] = e.value;
    const { settings, reads } = loadRecordingReads(env);
    // Envoy Gateway also sets GRPC_SERVER_TLS_CA_CERT, which the reference does not read either
    // (its settings.go has GRPC_CLIENT_TLS_CACERT): neither then asks Envoy for a client certificate.
    expect(Object.keys(env).filter((n) => !reads.has(n))).toEqual(['GRPC_SERVER_TLS_CA_CERT']);
    expect(settings.configType).toBe('GRPC_XDS_SOTW');
    expect(settings.xds).toMatchObject({ serverUrl: 'envoy-gateway:18001', nodeId: 'envoy-ratelimit' });
    expect(settings.grpcTls).toMatchObject({ cert: '/certs/tls.crt', key: '/certs/tls.key' });
    expect(settings.prometheusPort).toBe(19001);
    expect(settings.backendFailureMode).toBe('local');
    expect(settings.orphanScan?.intervalMs).toBe(600_000);
    // The zero-reset swap (issue 30, docs/migrating.md): old and new pods count in the same keys.
    expect(settings.redisKeyLayout).toBe('reference');
  });

  it('Envoy Gateway: the rate limit filter goes after authentication, right before the router (envoy/README.md)', () => {
    const policy = parse(readFileSync(join(GATEWAYS, 'envoy-gateway-patchpolicy.yaml'), 'utf8')) as Manifest;
    const listenerPatch = (policy['spec'].jsonPatches as Manifest[]).find((p) => p['type'].endsWith('Listener'))!;
    const patched = applyListenerAdd(EG_LISTENER, listenerPatch['operation']);
    const names = (patched['default_filter_chain'].filters[0].typed_config.http_filters as Manifest[]).map((f) => f['name']);
    expect(names).toEqual([
      'envoy.filters.http.cors',
      'envoy.filters.http.jwt_authn',
      'envoy.filters.http.ext_authz',
      'envoy.filters.http.ratelimit',
      'envoy.filters.http.router',
    ]);
  });
});
