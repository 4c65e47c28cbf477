// Issue 28, section 4: the shipped alert rules (the chart's files/alert-rules.yaml, the kustomize
// component's PrometheusRule) load in Prometheus' own rule parser, and each fires against real
// /metrics scrapes of a server put in its state, evaluated by Prometheus' PromQL engine: Redis
// lost (backend unhealthy, answers by the failure mode), a rule file that does not load, an xDS
// snapshot NACKed, clients entering the policy's blocked tier, calls answered near the caller's
// deadline (Redis hung). None fires across two scrapes of a healthy, busy server.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { parse, stringify } from 'yaml';
import { projectRoot } from '../../src/base/paths';
import { trackDir } from '../harness/cleanup-registry';
import { RedisProcess } from '../harness/redis-process';
import { waitUntil } from '../harness/wait';
import { helmTemplate } from '../helpers/helm-render';
import { parseScrape, total } from '../helpers/metrics-scrape';
import { evaluateAlerts, promRulesBinary, ruleParseErrors, type TimedScrape } from '../helpers/prom-rules';
import { oneDescriptor } from '../helpers/rls-client';
import { startTestApp, type TestApp } from '../helpers/test-app';
import { startXdsServer, xdsServerBinary, type RateLimitConfigJson, type XdsServer } from '../helpers/xds-server';

const CHART = join(projectRoot, 'deploy/helm/floodgate');
const CHART_RULES = join(CHART, 'files/alert-rules.yaml');
const COMPONENT_RULES = join(projectRoot, 'deploy/kubernetes/components/prometheusrule/prometheusrule.yaml');

const ALERTS = [
  'FloodgateBackendUnhealthy',
  'FloodgateFailureModeAnswers',
  'FloodgateRuleReloadFailing',
  'FloodgateXdsNack',
  'FloodgatePolicyBlockedGrowing',
  'FloodgateCallsNearDeadline',
];

const RULES = {
  'plain.yaml': 'domain: plain\ndescriptors:\n  - key: k\n    rate_limit: { unit: minute, requests_per_unit: 100000 }\n',
  'api.yaml': `
domain: api
policy:
  client: remote_address
  window_seconds: 60
  weights: { requests: 1, repeats: 0, routes: 0, denials: 3 }
  thresholds: { elevated: 6, suspicious: 12, blocked: 20 }
  limit_percent: { elevated: 50, suspicious: 10 }
  blocked_seconds: 30
  quiet_seconds: 30
descriptors:
  - key: remote_address
    rate_limit: { unit: minute, requests_per_unit: 10 }
`,
};

async function metricsText(t: TestApp): Promise<string> {
  return (await fetch(`${t.debugUrl}/metrics`)).text();
}

async function metricAtLeast(t: TestApp, name: string, labels: Record<string, string>, atLeast: number): Promise<void> {
  await waitUntil(`${name} >= ${atLeast}`, async () => total(parseScrape(await metricsText(t)), name, labels) >= atLeast, {
    timeoutMs: 20_000,
    intervalMs: 100,
  });
}

async function plainCalls(t: TestApp, count: number): Promise<void> {
  for (let i = 0; i < count; i++) expect((await t.client.shouldRateLimit(oneDescriptor('plain', { k: 'a' }))).overall_code).toBe('OK');
}

/** Only the named alerts return series; every other alert returns none. */
function expectFiring(alerts: Record<string, number>, firing: readonly string[]): void {
  expect(Object.keys(alerts).sort()).toEqual([...ALERTS].sort());
  for (const name of ALERTS) {
    if (firing.includes(name)) expect(alerts[name], name).toBeGreaterThan(0);
    else expect(alerts[name], name).toBe(0);
  }
}

describe('the alert rules', () => {
  beforeAll(() => {
    promRulesBinary(); // a build failure fails here, loudly
  }, 900_000);

  test("load in Prometheus' rule parser, as a rule file and as the PrometheusRule object", () => {
    expect(ruleParseErrors(CHART_RULES, COMPONENT_RULES)).toEqual([]);
  });

  test('the kustomize component and the chart ship the same groups, one alert for each case', () => {
    const chart = parse(readFileSync(CHART_RULES, 'utf8')) as { groups: { rules: { alert: string }[] }[] };
    const component = parse(readFileSync(COMPONENT_RULES, 'utf8')) as { kind: string; spec: unknown };
    expect(component.kind).toBe('PrometheusRule');
    expect(component.spec).toEqual(chart);
    expect(chart.groups.flatMap((g) => g.rules.map((r) => r.alert)).sort()).toEqual([...ALERTS].sort());
  });

  test('the chart renders them with metrics.prometheusRule.enabled (Helm leaves their {{ $labels }} alone), and not by default', () => {
    const chart = parse(readFileSync(CHART_RULES, 'utf8')) as unknown;
    const rules = (values: Record<string, unknown>) => helmTemplate(CHART, values).objects.filter((o) => o['kind'] === 'PrometheusRule');
    expect(rules({})).toEqual([]);
    const [object, ...more] = rules({ metrics: { prometheusRule: { enabled: true, labels: { release: 'kube-prometheus-stack' } } } });
    expect(more).toEqual([]);
    expect((object!['metadata'] as { labels: Record<string, string> }).labels['release']).toBe('kube-prometheus-stack');
    expect(object!['spec']).toEqual(chart);
    const dir = mkdtempSync(join(tmpdir(), 'floodgate-rendered-rules-'));
    trackDir(dir);
    writeFileSync(join(dir, 'rendered.yaml'), stringify(object));
    expect(ruleParseErrors(join(dir, 'rendered.yaml'))).toEqual([]);
  }, 900_000);
});

describe('each alert fires on a real scrape of a server in its state', () => {
  let redis: RedisProcess;
  let t: TestApp;

  beforeAll(async () => {
    promRulesBinary();
    redis = await RedisProcess.start();
    t = await startTestApp(RULES, { REDIS_URL: redis.url, BACKEND_FAILURE_MODE: 'local', CACHE_KEY_PREFIX: `alerts_${Date.now()}_` });
  }, 900_000);
  afterAll(async () => {
    if (redis?.pid !== undefined && redis.isRunning()) process.kill(redis.pid, 'SIGCONT');
    await t?.stop();
    await redis?.stop();
  });

  test('healthy and busy: none fires; then Redis hung and lost, a broken rule file, a blocked client: each fires', async () => {
    await plainCalls(t, 20);
    // A well-behaved client of the policy's domain: its decisions are counted.
    await t.client.shouldRateLimit(oneDescriptor('api', { remote_address: '10.0.0.2' }));
    const healthy0 = await metricsText(t);
    await plainCalls(t, 20);
    const healthy1 = await metricsText(t);
    expectFiring(
      evaluateAlerts(CHART_RULES, [
        { seconds: 0, text: healthy0 },
        { seconds: 60, text: healthy1 },
      ]),
      [],
    );

    // A client hammering the policy's domain ends in the blocked tier.
    for (let i = 0; i < 30; i++) {
      await t.client.shouldRateLimit(oneDescriptor('api', { remote_address: '10.0.0.1' }));
      if (total(parseScrape(await metricsText(t)), 'floodgate_policy_tier_changes_total', { to: 'blocked' }) > 0) break;
    }
    await metricAtLeast(t, 'floodgate_policy_tier_changes_total', { to: 'blocked' }, 1);
    // A rule file that does not load: the previous rules stay.
    t.writeRule('broken.yaml', 'domain: broken\ndescriptors:\n  - key: k\n    rate_limit: { unit: fortnight, requests_per_unit: 1 }\n');
    await metricAtLeast(t, 'ratelimit_service_config_load_error', {}, 1);
    // Redis hangs: calls wait for it until the failure mode answers, near their deadline.
    process.kill(redis.pid!, 'SIGSTOP');
    await Promise.all(Array.from({ length: 5 }, (_, i) => t.client.shouldRateLimit(oneDescriptor('plain', { k: `hung${i}` }), 400)));
    await metricAtLeast(t, 'floodgate_calls_near_deadline_total', {}, 1);
    // Redis is lost: the backend is unhealthy and calls are counted in this process.
    process.kill(redis.pid!, 'SIGCONT');
    await redis.kill('SIGKILL');
    await waitUntil('floodgate_backend_healthy 0', async () => total(parseScrape(await metricsText(t)), 'floodgate_backend_healthy') === 0, {
      timeoutMs: 20_000,
      intervalMs: 100,
    });
    await plainCalls(t, 5);
    await metricAtLeast(t, 'floodgate_backend_failure_mode_answers_total', { mode: 'local' }, 1);
    const broken = await metricsText(t);
    const scrapes: TimedScrape[] = [
      { seconds: 0, text: healthy1 },
      { seconds: 60, text: broken },
    ];
    expectFiring(evaluateAlerts(CHART_RULES, scrapes), [
      'FloodgateBackendUnhealthy',
      'FloodgateFailureModeAnswers',
      'FloodgateRuleReloadFailing',
      'FloodgatePolicyBlockedGrowing',
      'FloodgateCallsNearDeadline',
    ]);
    // The kustomize component's copy says the same.
    expectFiring(evaluateAlerts(COMPONENT_RULES, scrapes), [
      'FloodgateBackendUnhealthy',
      'FloodgateFailureModeAnswers',
      'FloodgateRuleReloadFailing',
      'FloodgatePolicyBlockedGrowing',
      'FloodgateCallsNearDeadline',
    ]);

    // The bad file stays on disk and nothing reloads: the watcher reported it once. Scraped
    // again now, the same state, placed every 5 minutes up to 30 minutes later (no waiting):
    // the alert still fires, past its `for`, long after a 10-minute window of the counters.
    const stillBroken = await metricsText(t);
    const later: TimedScrape[] = [...scrapes, ...Array.from({ length: 6 }, (_, i) => ({ seconds: 60 + 300 * (i + 1), text: stillBroken }))];
    for (const file of [CHART_RULES, COMPONENT_RULES]) {
      const alerts = evaluateAlerts(file, later);
      expect(alerts['FloodgateRuleReloadFailing'], file).toBeGreaterThan(0);
      expect(alerts['FloodgateBackendUnhealthy'], file).toBeGreaterThan(0);
    }
    // A good load clears it at once.
    const loaded = total(parseScrape(stillBroken), 'ratelimit_service_config_load_success');
    t.writeRule('broken.yaml', 'domain: broken\ndescriptors:\n  - key: k\n    rate_limit: { unit: minute, requests_per_unit: 1 }\n');
    await metricAtLeast(t, 'ratelimit_service_config_load_success', {}, loaded + 1);
    const fixed: TimedScrape = { seconds: 60 + 300 * 6 + 15, text: await metricsText(t) };
    expect(evaluateAlerts(CHART_RULES, [...later, fixed])['FloodgateRuleReloadFailing']).toBe(0);
  });
});

describe('FloodgateXdsNack fires on a real scrape of a server that NACKed a snapshot', () => {
  let server: XdsServer;
  let t: TestApp;
  const config = (name: string, domain: string, descriptors: unknown[]): RateLimitConfigJson => ({ name, domain, descriptors });

  beforeAll(async () => {
    promRulesBinary();
    xdsServerBinary();
    const dir = mkdtempSync(join(tmpdir(), 'floodgate-alerts-xds-'));
    trackDir(dir);
    server = await startXdsServer({ statePath: join(dir, 'state.json') });
    await server.push('v1', [config('plain', 'plain', [{ key: 'k', rate_limit: { unit: 'MINUTE', requests_per_unit: 100000 } }])]);
    t = await startTestApp(
      {},
      {
        CONFIG_TYPE: 'GRPC_XDS_SOTW',
        CONFIG_GRPC_XDS_SERVER_URL: server.address,
        CONFIG_GRPC_XDS_NODE_ID: 'default',
        CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL: '100ms',
      },
    );
    await metricAtLeast(t, 'ratelimit_service_config_load_success', {}, 1);
  }, 900_000);
  afterAll(async () => {
    await t?.stop();
    await server?.kill();
  });

  test('a snapshot with a rule floodgate refuses: NACKed, counted, and the alert fires', async () => {
    await plainCalls(t, 10);
    const before = await metricsText(t);
    await server.push('v2', [config('broken', 'broken', [{ key: 'k', rate_limit: { requests_per_unit: 1 } }])]);
    await metricAtLeast(t, 'floodgate_xds_nacks_total', {}, 1);
    await plainCalls(t, 10);
    const after = await metricsText(t);
    expectFiring(
      evaluateAlerts(CHART_RULES, [
        { seconds: 0, text: before },
        { seconds: 60, text: after },
      ]),
      ['FloodgateXdsNack', 'FloodgateRuleReloadFailing'],
    );
  });
});
