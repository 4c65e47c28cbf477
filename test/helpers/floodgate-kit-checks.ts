// The checks every rendering of floodgate's Kubernetes kit must pass, whoever rendered it: the
// kustomize base (test/unit/deploy-configs.test.ts) and the Helm chart under each value set
// (test/integration/helm-chart.test.ts). Each check reads the rendered objects only and asserts
// them against floodgate's own code: the container's environment goes through the real
// loadSettings, the rules ConfigMap through the real rule loader, every object through the
// Kubernetes JSON schemas of kubernetes-models.
import { expect, it } from 'vitest';
import { compileRules } from '../../src/config/compile-rules';
import { parseRuleFile } from '../../src/config/parse-rule-file';
import type { RuleSet } from '../../src/config/rule-types';
import { loadSettings, type Settings } from '../../src/settings/settings';

// Rendered manifests are untyped by nature; the checks assert the shape they rely on.
export type Manifest = Record<string, any>;

type Validatable = new (data: Manifest) => { validate(): void };

/** The schema class of every apiVersion/kind the kit and its examples use. */
export async function schemaClasses(): Promise<Map<string, Validatable>> {
  const modules: Record<string, Record<string, unknown>> = {
    v1: await import('kubernetes-models/v1'),
    'apps/v1': await import('kubernetes-models/apps/v1'),
    'batch/v1': await import('kubernetes-models/batch/v1'),
    'policy/v1': await import('kubernetes-models/policy/v1'),
    'autoscaling/v2': await import('kubernetes-models/autoscaling/v2'),
    'networking.k8s.io/v1': await import('kubernetes-models/networking.k8s.io/v1'),
    'monitoring.coreos.com/v1': await import('@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1'),
    'networking.istio.io/v1alpha3': await import('@kubernetes-models/istio/networking.istio.io/v1alpha3'),
  };
  const out = new Map<string, Validatable>();
  for (const [apiVersion, mod] of Object.entries(modules)) {
    for (const [kind, cls] of Object.entries(mod)) if (typeof cls === 'function') out.set(`${apiVersion}/${kind}`, cls as Validatable);
  }
  return out;
}

export function findOne(objects: readonly Manifest[], kind: string, name: string): Manifest {
  const found = objects.filter((o) => o['kind'] === kind && o['metadata']?.name === name);
  if (found.length !== 1) throw new Error(`expected one ${kind} ${name}, found ${found.length}`);
  return found[0] as Manifest;
}

function ofKind(objects: readonly Manifest[], kind: string): Manifest[] {
  return objects.filter((o) => o['kind'] === kind);
}

/** A label selector against a pod's labels; only matchLabels is understood (matchExpressions fails loudly). */
export function selects(selector: Manifest | undefined, labels: Readonly<Record<string, string>> | undefined): boolean {
  if (selector?.['matchExpressions'] !== undefined) throw new Error('matchExpressions is not understood by these checks');
  const matchLabels = (selector?.['matchLabels'] ?? selector ?? {}) as Record<string, string>;
  return Object.entries(matchLabels).every(([k, v]) => labels?.[k] === v);
}

/** The one only key of a one-key object (`valueFrom: {secretKeyRef: ...}`). */
function oneKey(o: Manifest): [string, Manifest] {
  const keys = Object.keys(o);
  if (keys.length !== 1) throw new Error(`expected exactly one key, got ${JSON.stringify(keys)}`);
  const key = keys[0] as string;
  return [key, (o[key] ?? {}) as Manifest];
}

/** Stand-in for a Secret's value: the real one is never in the rendered kit. */
export const SECRET_STAND_IN = 'floodgate-user:stand-in-password';

export interface FloodgateKit {
  readonly objects: readonly Manifest[];
  readonly deployment: Manifest;
  readonly podSpec: Manifest;
  readonly podLabels: Record<string, string>;
  readonly container: Manifest;
}

/** The floodgate Deployment (the one whose pods run a container named floodgate) and its parts. */
export function floodgateKit(objects: readonly Manifest[]): FloodgateKit {
  const deployments = ofKind(objects, 'Deployment').filter((d) =>
    ((d['spec']?.template?.spec?.containers ?? []) as Manifest[]).some((c) => c['name'] === 'floodgate'),
  );
  if (deployments.length !== 1) throw new Error(`expected one Deployment with a floodgate container, found ${deployments.length}`);
  const deployment = deployments[0] as Manifest;
  const podSpec = deployment['spec'].template.spec as Manifest;
  const container = (podSpec['containers'] as Manifest[]).find((c) => c['name'] === 'floodgate') as Manifest;
  return { objects, deployment, podSpec, podLabels: deployment['spec'].template.metadata.labels, container };
}

/** The container's environment as the pod would see it (ConfigMap keys resolved in the kit, Secrets replaced by a stand-in). */
export function containerEnv(kit: FloodgateKit): Record<string, string> {
  expect(kit.container['envFrom'], 'list variables one by one under env: so they can be checked').toBeUndefined();
  const env: Record<string, string> = {};
  for (const item of (kit.container['env'] ?? []) as Manifest[]) {
    const name = item['name'] as string;
    expect(env, `${name} is set twice`).not.toHaveProperty(name);
    if (typeof item['value'] === 'string') {
      env[name] = item['value'];
      continue;
    }
    expect(item['value'], `${name}: values must be strings in a Deployment (quote "true", "10000")`).toBeUndefined();
    const [source, ref] = oneKey(item['valueFrom'] as Manifest);
    if (source === 'secretKeyRef') {
      expect(typeof ref['name'] === 'string' && ref['name'] !== '', `${name}: secretKeyRef needs a Secret name`).toBe(true);
      expect(typeof ref['key'] === 'string' && ref['key'] !== '', `${name}: secretKeyRef needs a key`).toBe(true);
      env[name] = SECRET_STAND_IN;
    } else if (source === 'configMapKeyRef') {
      const value = findOne(kit.objects, 'ConfigMap', ref['name'] as string)['data']?.[ref['key'] as string];
      expect(typeof value, `${name}: ConfigMap ${ref['name']} has no key ${ref['key']}`).toBe('string');
      env[name] = value as string;
    } else {
      throw new Error(`${name}: valueFrom.${source} is not understood by these checks`);
    }
  }
  return env;
}

/** loadSettings on `env`, recording every variable it reads. */
export function loadRecordingReads(env: Record<string, string>): { settings: Settings; reads: Set<string> } {
  const reads = new Set<string>();
  const tracked = new Proxy(env, {
    get(target, prop, receiver) {
      if (typeof prop === 'string') reads.add(prop);
      return Reflect.get(target, prop, receiver) as unknown;
    },
  });
  return { settings: loadSettings(tracked), reads };
}

/** The rules a ConfigMap's files give, through floodgate's own rule loader. */
export function compileConfigMapRules(data: Readonly<Record<string, string>>): RuleSet {
  return compileRules(
    Object.entries(data).map(([name, text]) => parseRuleFile(name, text)),
    { mergeDomainConfig: false },
  );
}

/** The volume mounted at or above `path` in the container, if any. */
function volumeAt(kit: FloodgateKit, path: string): { mount: Manifest; volume: Manifest } | undefined {
  const mount = ((kit.container['volumeMounts'] ?? []) as Manifest[]).find(
    (m) => path === m['mountPath'] || path.startsWith(`${(m['mountPath'] as string).replace(/\/$/, '')}/`),
  );
  if (!mount) return undefined;
  const volume = ((kit.podSpec['volumes'] ?? []) as Manifest[]).find((v) => v['name'] === mount['name']);
  return volume ? { mount, volume } : undefined;
}

/** floodgate's own namespace in the checks: a peer without a namespaceSelector admits pods of this one only. */
export const OWN_NAMESPACE = 'rl';

/** A pod that calls floodgate: its labels and the namespace it runs in. */
export interface PeerPod {
  readonly labels: Record<string, string>;
  readonly namespace: string;
}

/**
 * The gateways that call floodgate, where they run by default: ours beside floodgate, Envoy
 * Gateway's proxies in its controller namespace, Istio's ingress gateway in istio-system.
 */
export const GATEWAY_PODS: Readonly<Record<string, PeerPod>> = {
  'a pod labelled app.kubernetes.io/component=gateway, in floodgate’s namespace': {
    labels: { 'app.kubernetes.io/component': 'gateway', app: 'my-envoy' },
    namespace: OWN_NAMESPACE,
  },
  // internal/infrastructure/kubernetes/proxy/testdata/deployments/default.yaml in envoyproxy/gateway
  "Envoy Gateway's proxy (envoy-gateway-system)": {
    labels: {
      'app.kubernetes.io/component': 'proxy',
      'app.kubernetes.io/managed-by': 'envoy-gateway',
      'app.kubernetes.io/name': 'envoy',
      'gateway.envoyproxy.io/owning-gateway-name': 'eg',
      'gateway.envoyproxy.io/owning-gateway-namespace': 'default',
    },
    namespace: 'envoy-gateway-system',
  },
  // istio/istio manifests/charts/gateways/istio-ingress: both labels on the default ingress gateway
  "Istio's ingress gateway (istio-system)": { labels: { app: 'istio-ingressgateway', istio: 'ingressgateway' }, namespace: 'istio-system' },
  "Istio's ingress gateway (istio label only)": { labels: { istio: 'ingressgateway' }, namespace: 'istio-system' },
};

/**
 * Pods that must NOT reach gRPC: a gateway's labels are set by whoever writes the pod, so in any
 * other namespace they prove nothing (issue 26 finding 8); and look-alike labels.
 */
export const STRANGER_PODS: Readonly<Record<string, PeerPod>> = {
  'a web pod': { labels: { app: 'web' }, namespace: OWN_NAMESPACE },
  'component=proxy alone': { labels: { 'app.kubernetes.io/component': 'proxy' }, namespace: 'envoy-gateway-system' },
  'managed-by=envoy-gateway alone': { labels: { 'app.kubernetes.io/managed-by': 'envoy-gateway' }, namespace: 'envoy-gateway-system' },
  'component=gateway in another namespace': { labels: { 'app.kubernetes.io/component': 'gateway' }, namespace: 'team-a' },
  "Envoy Gateway's proxy labels in another namespace": {
    labels: { 'app.kubernetes.io/component': 'proxy', 'app.kubernetes.io/managed-by': 'envoy-gateway' },
    namespace: 'team-a',
  },
  "Istio's ingress labels in another namespace": { labels: { istio: 'ingressgateway', app: 'istio-ingressgateway' }, namespace: 'team-a' },
};

/**
 * The namespaces a peer's namespaceSelector names by `kubernetes.io/metadata.name` (a label the
 * API server sets and pod authors cannot), or undefined when it selects by anything else.
 */
export function namespacesNamed(selector: Manifest): string[] | undefined {
  const labels = Object.entries((selector['matchLabels'] ?? {}) as Record<string, string>);
  const expressions = (selector['matchExpressions'] ?? []) as Manifest[];
  if (labels.length + expressions.length !== 1) return undefined;
  if (labels.length === 1) return labels[0]![0] === 'kubernetes.io/metadata.name' ? [labels[0]![1]] : undefined;
  const e = expressions[0]!;
  return e['key'] === 'kubernetes.io/metadata.name' && e['operator'] === 'In' ? (e['values'] as string[]) : undefined;
}

/** Does a NetworkPolicy ingress rule admit this pod on this port? */
function admits(rule: Manifest, pod: PeerPod, port: number, portName: string): boolean {
  const ports = rule['ports'] as Manifest[] | undefined;
  const portOk = ports === undefined || ports.some((p) => p['port'] === port || p['port'] === portName);
  const peers = (rule['from'] ?? []) as Manifest[];
  const namespaceOk = (peer: Manifest): boolean =>
    peer['namespaceSelector'] === undefined
      ? pod.namespace === OWN_NAMESPACE
      : (namespacesNamed(peer['namespaceSelector'] as Manifest)?.includes(pod.namespace) ?? true);
  return portOk && peers.some((peer) => peer['podSelector'] !== undefined && selects(peer['podSelector'], pod.labels) && namespaceOk(peer));
}

export interface KitCheckOptions {
  /** The image's numeric user, which runAsUser must name. */
  readonly imageUser: string;
}

/**
 * Registers the checks every rendering of the kit must pass. `render` is called inside each
 * test, so a kit rendered in a beforeAll is seen once it exists.
 */
export function floodgateKitChecks(render: () => readonly Manifest[], options: KitCheckOptions): void {
  const kit = () => floodgateKit(render());
  const settings = () => loadRecordingReads(containerEnv(kit())).settings;

  it('every object validates against its Kubernetes schema (kubernetes-models, offline)', async () => {
    const classes = await schemaClasses();
    for (const o of render()) {
      const what = `${o['kind']} ${o['metadata']?.name}`;
      const cls = classes.get(`${o['apiVersion']}/${o['kind']}`);
      expect(cls, `no schema for ${o['apiVersion']}/${o['kind']}`).toBeDefined();
      expect(() => new cls!(o).validate(), what).not.toThrow();
    }
  });

  it('every object is namespace-less, named once per kind and labelled app.kubernetes.io/name=floodgate', () => {
    const seen = new Set<string>();
    for (const o of render()) {
      const what = `${o['kind']} ${o['metadata']?.name}`;
      expect(seen.has(what), `${what} twice`).toBe(false);
      seen.add(what);
      expect(o['metadata']?.namespace, what).toBeUndefined();
      expect(o['metadata']?.labels?.['app.kubernetes.io/name'], what).toBe('floodgate');
    }
  });

  it('the environment is accepted by loadSettings, which reads every variable set', () => {
    const { reads } = loadRecordingReads(containerEnv(kit()));
    const unread = Object.keys(containerEnv(kit())).filter((name) => !reads.has(name));
    expect(unread, 'variables floodgate does not read (typo? wrong name?)').toEqual([]);
  });

  it('with Redis, the orphan scan is on (the dashboard panel "Counter keys without TTL" needs it)', () => {
    const s = settings();
    if (s.backendType !== 'redis') return;
    expect(s.orphanScan, 'ORPHAN_SCAN_INTERVAL').toBeDefined();
    expect(s.orphanScan!.intervalMs).toBeGreaterThanOrEqual(60_000);
  });

  it('every file a setting names is in a mounted Secret or ConfigMap', () => {
    const env = containerEnv(kit());
    const files = Object.entries(env).filter(([name, value]) => /(CERT|KEY|CACERT)$/.test(name) && value.startsWith('/'));
    for (const [name, path] of files) {
      const found = volumeAt(kit(), path);
      expect(found, `${name}=${path} is under no volume mount`).toBeDefined();
      expect(
        found!.volume['secret'] ?? found!.volume['configMap'] ?? found!.volume['projected'],
        `${name}: volume ${found!.mount['name']}`,
      ).toBeDefined();
    }
  });

  it('rules: with CONFIG_TYPE=FILE a ConfigMap is mounted as a directory where floodgate reads rules, and compiles', () => {
    const s = settings();
    const k = kit();
    const mounted = volumeAt(k, s.rulesDir);
    if (s.configType === 'GRPC_XDS_SOTW') {
      expect(mounted, 'no rule files are read under CONFIG_TYPE=GRPC_XDS_SOTW').toBeUndefined();
      expect(s.xds?.serverUrl).toMatch(/^[\w.-]+:\d+$/);
      return;
    }
    expect(mounted, `a volume mounted at ${s.rulesDir}`).toBeDefined();
    expect(mounted!.mount['mountPath']).toBe(s.rulesDir);
    // A subPath mount never sees ConfigMap updates, which would defeat the hot reload.
    expect(mounted!.mount['subPath']).toBeUndefined();
    const name = mounted!.volume['configMap']?.name as string;
    expect(name, 'the rules volume is a ConfigMap').toBeDefined();
    const configMap = k.objects.find((o) => o['kind'] === 'ConfigMap' && o['metadata'].name === name);
    if (configMap === undefined) return; // a ConfigMap the operator manages (rules.existingConfigMap)
    for (const file of Object.keys(configMap['data'] ?? {})) expect(file, 'rule files end in .yaml or .yml').toMatch(/\.ya?ml$/);
    expect(() => compileConfigMapRules(configMap['data'] ?? {})).not.toThrow();
  });

  it('gives the drain time to finish before the kubelet kills the pod', () => {
    // main.ts exits at the latest SHUTDOWN_GRACE_MS + 5 s after SIGTERM.
    expect((kit().podSpec['terminationGracePeriodSeconds'] as number) * 1000).toBeGreaterThan(settings().shutdownGraceMs + 5000);
  });

  it('declares the ports floodgate listens on, and any scrape annotations match', () => {
    const s = settings();
    const k = kit();
    const ports = Object.fromEntries((k.container['ports'] as Manifest[]).map((p) => [p['name'] as string, p['containerPort'] as number]));
    const expected: Record<string, number> = { grpc: s.grpcPort, http: s.port };
    if (s.usePrometheus) expected['metrics'] = s.prometheusPort;
    expect(ports).toEqual(expected);
    // The debug port binds 127.0.0.1 and is deliberately not declared.
    expect(s.debugHost).toBe('127.0.0.1');
    const annotations = (k.deployment['spec'].template.metadata.annotations ?? {}) as Manifest;
    if (annotations['prometheus.io/scrape'] === undefined) return;
    expect(annotations['prometheus.io/scrape']).toBe('true');
    expect(s.usePrometheus).toBe(true);
    expect(Number(annotations['prometheus.io/port'])).toBe(s.prometheusPort);
    expect(annotations['prometheus.io/path']).toBe(s.prometheusPath);
  });

  it('probes: ready = gRPC health "ratelimit"; alive = TCP on the gRPC port, never the Redis-dependent health', () => {
    const s = settings();
    const { container } = kit();
    const readiness = container['readinessProbe'] as Manifest;
    if (s.grpcTls?.clientCaCert) {
      // The kubelet's gRPC probe has no client certificate: /healthcheck answers the same question.
      expect(readiness['httpGet']).toEqual(expect.objectContaining({ path: '/healthcheck', port: s.port }));
    } else {
      expect(readiness['grpc']).toEqual({ port: s.grpcPort, service: 'ratelimit' });
    }
    const liveness = container['livenessProbe'] as Manifest;
    // With REDIS_HEALTH_CHECK_ACTIVE_CONNECTION=true, /healthcheck and gRPC health are NOT_SERVING while Redis is unreachable; a liveness
    // probe on them would restart every pod during a Redis outage.
    expect(liveness['httpGet']).toBeUndefined();
    expect(liveness['grpc']).toBeUndefined();
    expect(liveness['exec']).toBeUndefined();
    expect(liveness['tcpSocket']?.port).toBe(s.grpcPort);
  });

  it('startup: a TCP probe on the gRPC port lets start-up wait 10 minutes for Redis before liveness may restart the pod', () => {
    const s = settings();
    const { container } = kit();
    // No port opens until Redis answers (issue 28); without it, liveness restarts the pod ~35 s into the wait.
    const startup = container['startupProbe'] as Manifest | undefined;
    expect(startup, 'startupProbe').toBeDefined();
    expect(startup!['tcpSocket']?.port).toBe(s.grpcPort);
    expect((startup!['periodSeconds'] ?? 10) * (startup!['failureThreshold'] ?? 3)).toBeGreaterThanOrEqual(600);
    // Never Redis-dependent either: that is readiness' job.
    expect(startup!['httpGet']).toBeUndefined();
    expect(startup!['grpc']).toBeUndefined();
  });

  it('runs non-root as the image user, read-only root filesystem, no capabilities, no privilege escalation', () => {
    const { podSpec, container } = kit();
    expect(podSpec['securityContext'].runAsNonRoot).toBe(true);
    expect(String(podSpec['securityContext'].runAsUser)).toBe(options.imageUser.split(':')[0]);
    expect(podSpec['securityContext'].seccompProfile).toEqual({ type: 'RuntimeDefault' });
    expect(podSpec['automountServiceAccountToken']).toBe(false);
    expect(container['securityContext'].readOnlyRootFilesystem).toBe(true);
    expect(container['securityContext'].allowPrivilegeEscalation).toBe(false);
    expect(container['securityContext'].capabilities?.drop).toEqual(['ALL']);
    expect(container['securityContext'].capabilities?.add).toBeUndefined();
    expect(container['securityContext'].privileged ?? false).toBe(false);
  });

  it('requests CPU (the HPA scales on it) and memory, caps memory, and sets no CPU limit (throttling would exceed Envoy’s 20 ms)', () => {
    const { container } = kit();
    expect(container['resources']?.requests?.cpu).toBeDefined();
    expect(container['resources']?.requests?.memory).toBeDefined();
    expect(container['resources']?.limits?.memory).toBeDefined();
    expect(container['resources']?.limits?.cpu).toBeUndefined();
  });

  it('the Deployment selects its own pods; Services select them and name container ports that exist', () => {
    const k = kit();
    expect(selects(k.deployment['spec'].selector, k.podLabels)).toBe(true);
    const containerPorts = new Set((k.container['ports'] as Manifest[]).map((p) => p['name'] as string));
    const services = ofKind(k.objects, 'Service');
    expect(services.length).toBeGreaterThan(0);
    for (const service of services) {
      const name = service['metadata'].name as string;
      expect(selects(service['spec'].selector, k.podLabels), `Service ${name} selects the pods`).toBe(true);
      for (const port of service['spec'].ports as Manifest[])
        expect(containerPorts.has(port['targetPort'] as string), `${name}: ${port['targetPort']}`).toBe(true);
      const grpc = (service['spec'].ports as Manifest[]).find((p) => p['name'] === 'grpc');
      expect(grpc, `Service ${name} has the grpc port`).toMatchObject({ port: settings().grpcPort, targetPort: 'grpc', appProtocol: 'grpc' });
    }
    expect(
      services.some((s) => s['spec'].clusterIP === 'None'),
      'a headless Service for Envoy’s STRICT_DNS cluster',
    ).toBe(true);
  });

  it('PodDisruptionBudget and HPA fit the Deployment; with an HPA the Deployment sets no replicas (they would fight on every apply)', () => {
    const k = kit();
    const pdbs = ofKind(k.objects, 'PodDisruptionBudget');
    const hpas = ofKind(k.objects, 'HorizontalPodAutoscaler');
    expect(hpas.length).toBeLessThanOrEqual(1);
    for (const pdb of pdbs) expect(selects(pdb['spec'].selector, k.podLabels)).toBe(true);
    const minAvailable = Math.max(0, ...pdbs.map((p) => p['spec'].minAvailable as number));
    for (const pdb of pdbs) expect(typeof pdb['spec'].minAvailable, 'minAvailable as a number').toBe('number');
    const hpa = hpas[0];
    if (hpa) {
      expect(hpa['spec'].scaleTargetRef).toEqual({ apiVersion: 'apps/v1', kind: 'Deployment', name: k.deployment['metadata'].name });
      expect(hpa['spec'].metrics).toEqual([expect.objectContaining({ type: 'Resource', resource: expect.objectContaining({ name: 'cpu' }) })]);
      expect(k.deployment['spec'].replicas, 'spec.replicas with an HPA').toBeUndefined();
      // Room to drain a node: always more pods than the PDB must keep.
      expect(hpa['spec'].minReplicas).toBeGreaterThan(minAvailable);
      expect(hpa['spec'].maxReplicas).toBeGreaterThanOrEqual(hpa['spec'].minReplicas);
    } else {
      expect(k.deployment['spec'].replicas).toBeGreaterThan(minAvailable);
    }
  });

  it('NetworkPolicy: the gRPC port admits our gateways, Envoy Gateway’s proxies and Istio’s ingress gateways in their namespaces, and no one else', () => {
    const k = kit();
    const s = settings();
    const policies = ofKind(k.objects, 'NetworkPolicy').filter((p) => selects(p['spec'].podSelector, k.podLabels));
    if (policies.length === 0) return; // networkPolicy.enabled=false
    for (const policy of policies) {
      expect(policy['spec'].policyTypes).toContain('Ingress');
      for (const rule of policy['spec'].ingress as Manifest[]) {
        // A rule without `from` (or with an empty peer) admits everyone; so would an ipBlock.
        expect((rule['from'] as Manifest[] | undefined)?.length ?? 0).toBeGreaterThan(0);
        expect(rule['ports'], 'every rule names its ports').toBeDefined();
        for (const peer of rule['from'] as Manifest[]) {
          expect(peer['ipBlock']).toBeUndefined();
          expect(Object.keys(peer['podSelector']?.matchLabels ?? {}).length, JSON.stringify(peer)).toBeGreaterThan(0);
          // Pod labels are the pod author's to set: a peer in another namespace is named by
          // kubernetes.io/metadata.name, never `{}` or a label anyone may put on a namespace.
          if (peer['namespaceSelector'] !== undefined)
            expect(namespacesNamed(peer['namespaceSelector'] as Manifest), `${JSON.stringify(peer)} names its namespaces`).toBeDefined();
        }
      }
    }
    const rules = policies.flatMap((p) => p['spec'].ingress as Manifest[]);
    for (const [who, pod] of Object.entries(GATEWAY_PODS)) {
      expect(
        rules.some((r) => admits(r, pod, s.grpcPort, 'grpc')),
        `${who} (${JSON.stringify(pod)}) reaches gRPC`,
      ).toBe(true);
    }
    for (const [who, pod] of Object.entries(STRANGER_PODS)) {
      expect(
        rules.some((r) => admits(r, pod, s.grpcPort, 'grpc')),
        `${who} (${JSON.stringify(pod)}) is refused`,
      ).toBe(false);
    }
  });

  it('a ServiceMonitor, if any, scrapes the metrics port of a Service that selects the pods', () => {
    const k = kit();
    for (const monitor of ofKind(k.objects, 'ServiceMonitor')) {
      const services = ofKind(k.objects, 'Service').filter((svc) => selects(monitor['spec'].selector, svc['metadata'].labels));
      expect(services.length, 'Services the ServiceMonitor selects').toBeGreaterThan(0);
      for (const endpoint of monitor['spec'].endpoints as Manifest[]) {
        const withPort = services.filter((svc) => (svc['spec'].ports as Manifest[]).some((p) => p['name'] === endpoint['port']));
        expect(withPort.length, `a selected Service has port ${endpoint['port']}`).toBeGreaterThan(0);
        expect(endpoint['path'] ?? '/metrics').toBe(settings().prometheusPath);
      }
      // Scraping by ServiceMonitor and by pod annotation at once would scrape every series twice.
      expect(k.deployment['spec'].template.metadata.annotations?.['prometheus.io/scrape']).toBeUndefined();
    }
  });
}
