// deploy/helm/floodgate, rendered by Helm's own engine (test/helm-render, helm.sh/helm/v3) under
// several value sets, each checked as strictly as the kustomize base: the checks of
// test/helpers/floodgate-kit-checks.ts (kubernetes-models schemas, the environment through the
// real loadSettings, probes, security context, selectors, HPA and replicas, NetworkPolicy),
// then what each value set is for. Helm's linter must find nothing, and the chart must refuse
// value sets that would deploy something broken.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { projectRoot } from '../../src/base/paths';
import {
  compileConfigMapRules,
  containerEnv,
  findOne,
  floodgateKit,
  floodgateKitChecks,
  loadRecordingReads,
  type Manifest,
} from '../helpers/floodgate-kit-checks';
import { helmRenderBinary, helmTemplate, HelmRenderError, type HelmRendering } from '../helpers/helm-render';

const CHART = join(projectRoot, 'deploy', 'helm', 'floodgate');
/** The image's user: the last USER of deploy/Dockerfile. */
const IMAGE_USER = [...readFileSync(join(projectRoot, 'deploy', 'Dockerfile'), 'utf8').matchAll(/^USER\s+(\S+)\s*$/gm)].pop()?.[1] ?? 'none';

const RULE_FILES = readdirSync(join(projectRoot, 'config'))
  .filter((n) => /\.ya?ml$/.test(n))
  .sort();
const exampleRules = Object.fromEntries(RULE_FILES.map((n) => [n, readFileSync(join(projectRoot, 'config', n), 'utf8')]));

const VALUE_SETS: Record<string, { release: string; values: Record<string, unknown> }> = {
  defaults: { release: 'floodgate', values: {} },
  'sentinel, TLS, auth from a Secret, rules from files, ServiceMonitor': {
    release: 'edge',
    values: {
      redis: {
        type: 'SENTINEL',
        url: 'mymaster,redis-sentinel-0.redis-sentinel:26379,redis-sentinel-1.redis-sentinel:26379,redis-sentinel-2.redis-sentinel:26379',
        auth: { existingSecret: 'redis-auth', key: 'auth' },
        sentinelAuth: { existingSecret: 'redis-auth', key: 'sentinel-auth' },
        tls: { enabled: true, existingSecret: 'redis-tls', clientCertificate: true },
        orphanScan: { interval: '15m', replicas: true },
      },
      rules: { files: exampleRules },
      metrics: { serviceMonitor: { enabled: true, labels: { release: 'kube-prometheus-stack' } } },
    },
  },
  'cluster, fixed replicas (HPA off)': {
    release: 'floodgate',
    values: {
      redis: {
        type: 'CLUSTER',
        url: 'redis-cluster-0.redis-cluster:6379,redis-cluster-1.redis-cluster:6379,redis-cluster-2.redis-cluster:6379',
      },
      autoscaling: { enabled: false },
      replicaCount: 3,
      rules: { existingConfigMap: 'my-rules' },
    },
  },
  'xDS rules over mTLS (as Envoy Gateway runs it), mTLS on gRPC': {
    release: 'rl',
    values: {
      redis: { url: 'redis.redis.svc:6379' },
      rules: {
        source: 'xds',
        xds: {
          serverUrl: 'envoy-gateway.envoy-gateway-system:18001',
          nodeId: 'envoy-ratelimit',
          tls: { enabled: true, existingSecret: 'xds-tls', clientCertificate: true },
        },
      },
      grpcTls: { enabled: true, existingSecret: 'floodgate-grpc-tls', requireClientCertificate: true },
      networkPolicy: { enabled: false },
    },
  },
  'HPA on (3 to 20), larger PDB': {
    release: 'floodgate',
    values: {
      autoscaling: { enabled: true, minReplicas: 3, maxReplicas: 20 },
      podDisruptionBudget: { minAvailable: 2 },
      // Large numbers arrive as float64 in Helm's values: they must not render as 1e+06.
      shutdownGraceMs: 600_000,
      terminationGracePeriodSeconds: 610,
      rules: { files: { 'edge.yaml': exampleRules['edge.yaml'] } },
    },
  },
};

const rendered: Record<string, HelmRendering> = {};
beforeAll(() => {
  // The first build downloads Helm's module and compiles it: minutes on a cold cache.
  helmRenderBinary();
  for (const [name, set] of Object.entries(VALUE_SETS)) rendered[name] = helmTemplate(CHART, set.values, set.release);
}, 900_000);

const objectsOf = (name: string) => () => (rendered[name] as HelmRendering).objects;
const settingsOf = (name: string) => loadRecordingReads(containerEnv(floodgateKit(objectsOf(name)()))).settings;
const kinds = (name: string) => objectsOf(name)().map((o) => `${o['kind']} ${o['metadata'].name}`);

describe.each(Object.keys(VALUE_SETS))('helm template, %s', (name) => {
  it('helm lint finds nothing to warn about', () => {
    expect((rendered[name] as HelmRendering).lint.filter((m) => m.severity === 'WARNING' || m.severity === 'ERROR')).toEqual([]);
  });

  floodgateKitChecks(objectsOf(name), { imageUser: IMAGE_USER });
});

describe('what each value set is for', () => {
  it('defaults (`helm template <release> deploy/helm/floodgate`, no flags): Redis SINGLE at redis:6379 with the orphan scan, HPA 2-10 and no replicas field, PDB, NetworkPolicy, two Services', () => {
    const s = settingsOf('defaults');
    expect(s.redis).toMatchObject({ type: 'SINGLE', url: 'redis:6379', tls: false });
    expect(s.orphanScan?.intervalMs).toBe(600_000);
    expect(s.backendFailureMode).toBe('local');
    expect(kinds('defaults').sort()).toEqual([
      'Deployment floodgate',
      'HorizontalPodAutoscaler floodgate',
      'NetworkPolicy floodgate',
      'PodDisruptionBudget floodgate',
      'Service floodgate',
      'Service floodgate-headless',
    ]);
    const deployment = findOne(objectsOf('defaults')(), 'Deployment', 'floodgate');
    expect(deployment['spec']).not.toHaveProperty('replicas');
    expect(findOne(objectsOf('defaults')(), 'HorizontalPodAutoscaler', 'floodgate')['spec']).toMatchObject({ minReplicas: 2, maxReplicas: 10 });
    const chart = parse(readFileSync(join(CHART, 'Chart.yaml'), 'utf8')) as { appVersion: string };
    expect(deployment['spec'].template.spec.containers[0].image).toBe(`ghcr.io/floodgate-rls/floodgate:${chart.appVersion}`);
  });

  it('defaults: no rules given, so no empty ConfigMap: the pods wait for floodgate-rules (never an answer-OK-to-everything limiter), and the notes say how', () => {
    expect(kinds('defaults').filter((k) => k.startsWith('ConfigMap'))).toEqual([]);
    const volume = (floodgateKit(objectsOf('defaults')()).podSpec['volumes'] as Manifest[]).find((v) => v['name'] === 'rules');
    expect(volume?.['configMap']).toEqual({ name: 'floodgate-rules' });
    expect(rendered['defaults']?.notes).toContain('kubectl -n rl create configmap floodgate-rules --from-file=');
  });

  it('rules.allowNone=true is the explicit opt-out: an empty rules ConfigMap, and the notes warn', () => {
    const r = helmTemplate(CHART, { rules: { allowNone: true } });
    expect(findOne(r.objects, 'ConfigMap', 'floodgate-rules')['data'] ?? {}).toEqual({});
    expect(r.notes).toContain('every call is answered OK');
  });

  it('--set env.X=true (a boolean to Helm) and --set env.Y=1000000 pass the schema and render as strings', () => {
    // The chart before this refused it: "at '/env/TRACING_ENABLED': got boolean, want string".
    const r = helmTemplate(CHART, {}, 'floodgate', 'rl', ['env.TRACING_ENABLED=true', 'env.REDIS_POOL_SIZE=1000000']);
    const env = floodgateKit(r.objects).container['env'] as Manifest[];
    const value = (name: string) => env.find((e) => e['name'] === name)?.['value'];
    expect([value('TRACING_ENABLED'), value('REDIS_POOL_SIZE')]).toEqual(['true', '1000000']);
  });

  it('a sentinel URL given with --set needs its commas escaped (the chart README says so)', () => {
    const escaped = helmTemplate(CHART, {}, 'floodgate', 'rl', ['redis.type=SENTINEL', 'redis.url=mymaster\\,s0:26379\\,s1:26379']);
    expect(loadRecordingReads(containerEnv(floodgateKit(escaped.objects))).settings.redis?.url).toBe('mymaster,s0:26379,s1:26379');
    expect(() => helmTemplate(CHART, {}, 'floodgate', 'rl', ['redis.type=SENTINEL', 'redis.url=mymaster,s0:26379,s1:26379'])).toThrow(
      /key "s0:26379" has no value/,
    );
  });

  it('env takes booleans and numbers from a values file and renders them as strings', () => {
    const r = helmTemplate(CHART, { env: { TRACING_ENABLED: true, CACHE_KEY_PREFIX: 'fg_', REDIS_POOL_SIZE: 1_000_000 } });
    const env = floodgateKit(r.objects).container['env'] as Manifest[];
    const value = (name: string) => env.find((e) => e['name'] === name)?.['value'];
    expect([value('TRACING_ENABLED'), value('CACHE_KEY_PREFIX'), value('REDIS_POOL_SIZE')]).toEqual(['true', 'fg_', '1000000']);
  });

  it('sentinel: master name and sentinels, REDIS_AUTH and REDIS_SENTINEL_AUTH from the Secret, TLS files from the mounted Secret', () => {
    const set = 'sentinel, TLS, auth from a Secret, rules from files, ServiceMonitor';
    const s = settingsOf(set);
    expect(s.redis).toMatchObject({
      type: 'SENTINEL',
      tls: true,
      tlsCaCert: '/etc/floodgate/redis-tls/ca.crt',
      tlsClientCert: '/etc/floodgate/redis-tls/tls.crt',
      tlsClientKey: '/etc/floodgate/redis-tls/tls.key',
      username: 'floodgate-user',
      password: 'stand-in-password',
      sentinelPassword: 'stand-in-password',
    });
    expect(s.redis?.url.split(',')[0]).toBe('mymaster');
    expect(s.orphanScan).toMatchObject({ intervalMs: 900_000, replicas: true });
    const kit = floodgateKit(objectsOf(set)());
    const env = (kit.container['env'] as Manifest[]).filter((e) => e['valueFrom']);
    expect(env.map((e) => [e['name'], e['valueFrom'].secretKeyRef])).toEqual([
      ['REDIS_AUTH', { name: 'redis-auth', key: 'auth' }],
      ['REDIS_SENTINEL_AUTH', { name: 'redis-auth', key: 'sentinel-auth' }],
    ]);
    expect(kit.podSpec['volumes']).toContainEqual({ name: 'redis-tls', secret: { secretName: 'redis-tls' } });
    // Named after the release: edge-floodgate.
    expect(kit.deployment['metadata'].name).toBe('edge-floodgate');
    const monitor = findOne(objectsOf(set)(), 'ServiceMonitor', 'edge-floodgate');
    expect(monitor['metadata'].labels.release).toBe('kube-prometheus-stack');
  });

  it('rules from files: the ConfigMap holds config/ byte for byte and compiles to the same rules', () => {
    const set = 'sentinel, TLS, auth from a Secret, rules from files, ServiceMonitor';
    const data = findOne(objectsOf(set)(), 'ConfigMap', 'edge-floodgate-rules')['data'] as Record<string, string>;
    expect(Object.keys(data).sort()).toEqual(RULE_FILES);
    for (const file of RULE_FILES) expect(data[file], file).toBe(exampleRules[file]);
    expect(compileConfigMapRules(data).domainCount).toBe(RULE_FILES.length);
  });

  it('cluster: REDIS_TYPE=CLUSTER with the seed list, replicas: 3 and no HPA, rules from a ConfigMap the operator manages', () => {
    const set = 'cluster, fixed replicas (HPA off)';
    expect(settingsOf(set).redis?.type).toBe('CLUSTER');
    expect(settingsOf(set).redis?.url.split(',')).toHaveLength(3);
    expect(findOne(objectsOf(set)(), 'Deployment', 'floodgate')['spec'].replicas).toBe(3);
    expect(kinds(set).filter((k) => k.startsWith('HorizontalPodAutoscaler') || k.startsWith('ConfigMap'))).toEqual([]);
    expect(floodgateKit(objectsOf(set)()).podSpec['volumes']).toContainEqual({ name: 'rules', configMap: { name: 'my-rules' } });
  });

  it('xDS: CONFIG_TYPE=GRPC_XDS_SOTW with mTLS to the server, no rules volume; mTLS on gRPC makes readiness /healthcheck', () => {
    const set = 'xDS rules over mTLS (as Envoy Gateway runs it), mTLS on gRPC';
    const s = settingsOf(set);
    expect(s.configType).toBe('GRPC_XDS_SOTW');
    expect(s.xds).toMatchObject({
      serverUrl: 'envoy-gateway.envoy-gateway-system:18001',
      nodeId: 'envoy-ratelimit',
      tls: {
        caCert: '/etc/floodgate/xds-tls/ca.crt',
        clientCert: '/etc/floodgate/xds-tls/tls.crt',
        clientKey: '/etc/floodgate/xds-tls/tls.key',
      },
    });
    expect(s.grpcTls).toMatchObject({ clientCaCert: '/etc/floodgate/grpc-tls/ca.crt' });
    const kit = floodgateKit(objectsOf(set)());
    expect(kit.container['readinessProbe'].httpGet).toEqual({ path: '/healthcheck', port: 8080 });
    expect(kinds(set).filter((k) => k.startsWith('ConfigMap') || k.startsWith('NetworkPolicy'))).toEqual([]);
  });

  it('HPA on: the HPA owns the count (3 to 20) and the Deployment has no replicas field', () => {
    const set = 'HPA on (3 to 20), larger PDB';
    expect(findOne(objectsOf(set)(), 'HorizontalPodAutoscaler', 'floodgate')['spec']).toMatchObject({ minReplicas: 3, maxReplicas: 20 });
    expect(findOne(objectsOf(set)(), 'Deployment', 'floodgate')['spec']).not.toHaveProperty('replicas');
    expect(findOne(objectsOf(set)(), 'PodDisruptionBudget', 'floodgate')['spec'].minAvailable).toBe(2);
  });
});

describe('the chart refuses values that would deploy something broken', () => {
  const refused: [string, Record<string, unknown>, RegExp][] = [
    ['a misspelt value (values.schema.json)', { redis: { ulr: 'redis:6379' } }, /ulr/],
    ['an unknown failure mode', { failureMode: 'open' }, /failureMode/],
    ['the memory backend with several pods', { redis: { enabled: false } }, /counts per pod/],
    ['a variable the chart sets itself, under env', { env: { REDIS_URL: 'other:6379' } }, /env\.REDIS_URL: the chart sets REDIS_URL/],
    ['a grace period shorter than the drain', { terminationGracePeriodSeconds: 12 }, /must exceed shutdownGraceMs/],
    [
      'a PDB that blocks every drain',
      { autoscaling: { enabled: false }, replicaCount: 1 },
      /minAvailable \(1\) must be below the pod count \(1\)/,
    ],
    ['xDS without a server', { rules: { source: 'xds' } }, /rules\.xds\.serverUrl/],
    ['a rule file name that is not .yaml', { rules: { files: { 'edge.txt': 'domain: e' } } }, /rules\.files\.edge\.txt/],
    [
      'a gateway peer in any namespace (namespaceSelector: {})',
      { networkPolicy: { gateways: [{ namespaceSelector: {}, podSelector: { matchLabels: { app: 'envoy' } } }] } },
      /networkPolicy\.gateways\[0\]\.namespaceSelector: select namespaces by kubernetes\.io\/metadata\.name/,
    ],
    [
      'a Prometheus peer selected by a label anyone may put on a namespace',
      {
        networkPolicy: {
          prometheus: [{ namespaceSelector: { matchLabels: { team: 'obs' } }, podSelector: { matchLabels: { app: 'prometheus' } } }],
        },
      },
      /networkPolicy\.prometheus\[0\]\.namespaceSelector/,
    ],
    ['rules given and rules.allowNone at once', { rules: { allowNone: true, existingConfigMap: 'mine' } }, /rules\.allowNone/],
  ];
  it.each(refused)('%s', (_what, values, message) => {
    expect(() => helmTemplate(CHART, values)).toThrow(HelmRenderError);
    expect(() => helmTemplate(CHART, values)).toThrow(message);
  });
});
