import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { DeadlineExceededError } from '../../../src/base/errors';
import { OperatorMetrics, redisErrorKind } from '../../../src/metrics/operator-metrics';
import { parseScrape, total } from '../../helpers/metrics-scrape';

describe('redisErrorKind', () => {
  it('sorts Redis and ioredis errors into a fixed set of kinds', () => {
    expect(redisErrorKind(new DeadlineExceededError('late'))).toBe('timeout');
    expect(redisErrorKind(new Error('NOSCRIPT No matching script'))).toBe('noscript');
    expect(redisErrorKind(new Error('MOVED 3999 127.0.0.1:6381'))).toBe('cluster');
    expect(redisErrorKind(new Error('CLUSTERDOWN The cluster is down'))).toBe('cluster');
    expect(redisErrorKind(new Error("READONLY You can't write against a read only replica."))).toBe('readonly');
    expect(redisErrorKind(new Error('OOM command not allowed'))).toBe('oom');
    expect(redisErrorKind(new Error('Connection is closed.'))).toBe('connection');
    expect(redisErrorKind(new Error("Stream isn't writeable and enableOfflineQueue options is false"))).toBe('connection');
    expect(redisErrorKind(new Error('Command timed out'))).toBe('timeout');
    expect(redisErrorKind(new Error('ERR something else'))).toBe('other');
  });
});

describe('OperatorMetrics', () => {
  it('rules per domain keep at most maxDomainSeries series; the rest are summed under (other), so 9,000 xDS domains cost no long stall (issue 18, finding 4)', async () => {
    const registry = new Registry();
    const m = new OperatorMetrics(registry, { maxDomainSeries: 1000 });
    const rulesByDomain = new Map<string, { unlimited: boolean }[]>();
    for (let i = 0; i < 9000; i++) rulesByDomain.set(`domain-${i}`, [{ unlimited: false }, { unlimited: i % 2 === 0 }]);
    const start = performance.now();
    m.rulesLoaded({ rulesByDomain });
    const tookMs = performance.now() - start;
    const samples = parseScrape(await registry.metrics()).filter((s) => s.name === 'floodgate_rules_loaded');
    console.log(`rulesLoaded for 9,000 domains: ${tookMs.toFixed(1)} ms, ${samples.length} series`);
    expect(samples).toHaveLength(1001);
    expect(total(samples, 'floodgate_rules_loaded', { domain: 'domain-0' })).toBe(1);
    expect(total(samples, 'floodgate_rules_loaded', { domain: 'domain-999' })).toBe(2);
    expect(samples.some((s) => s.labels['domain'] === 'domain-1000')).toBe(false);
    // 8,000 domains of 1 or 2 rules with a limit each.
    expect(total(samples, 'floodgate_rules_loaded', { domain: '(other)' })).toBe(12_000);
    expect(total(samples, 'floodgate_rules_loaded')).toBe(13_500);
    // A smaller rule set: the domains that left are dropped, (other) with them.
    m.rulesLoaded({ rulesByDomain: new Map([['a', [{ unlimited: false }]]]) });
    const after = parseScrape(await registry.metrics()).filter((s) => s.name === 'floodgate_rules_loaded');
    expect(after.map((s) => [s.labels['domain'], s.value])).toEqual([['a', 1]]);
  });

  it('node labels stay bounded however many nodes a topology shows', async () => {
    const registry = new Registry();
    const m = new OperatorMetrics(registry);
    for (let i = 0; i < 200; i++) m.scriptCall('fixed_window', `m|10.0.0.${i}:6379`, 0.001);
    const samples = parseScrape(await registry.metrics());
    const nodes = new Set(samples.filter((s) => s.name === 'floodgate_redis_script_duration_seconds_count').map((s) => s.labels['node']));
    expect(nodes.size).toBe(65);
    expect(nodes.has('other')).toBe(true);
    expect(total(samples, 'floodgate_redis_script_duration_seconds_count')).toBe(200);
  });

  it('breaker states are read at scrape time; per-second nodes are told apart', async () => {
    const registry = new Registry();
    const m = new OperatorMetrics(registry);
    let open = false;
    m.watchBreakers(() => [
      { node: 'm|a:1', open },
      { node: 's|b:2', open: false },
    ]);
    expect(total(parseScrape(await registry.metrics()), 'floodgate_redis_circuit_open', { node: 'a:1' })).toBe(0);
    open = true;
    const samples = parseScrape(await registry.metrics());
    expect(total(samples, 'floodgate_redis_circuit_open', { node: 'a:1' })).toBe(1);
    expect(total(samples, 'floodgate_redis_circuit_open', { node: 'persecond/b:2' })).toBe(0);
  });
});
