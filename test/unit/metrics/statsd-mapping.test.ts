import { describe, expect, it } from 'vitest';
import { escapeMetricName, StatsdMapping } from '../../../src/metrics/statsd-mapping';
import { SettingsError } from '../../../src/base/errors';

const CONFIG = `
defaults:
  observer_type: histogram
mappings:
  - match: "ratelimit.service.rate_limit.*.*.total_hits"
    name: "rl_hits"
    labels: { domain: "$1", descriptor: "$2" }
  - match: "ratelimit\\\\.service\\\\.rate_limit\\\\.([^.]+)\\\\.(.+)\\\\.(over_limit|within_limit)"
    match_type: regex
    name: "rl_\${3}"
    labels: { domain: "$1", path: "$2", missing: "$9" }
  - match: "ratelimit.service.rate_limit.*.*.near_limit"
    action: drop
    name: dropped
  - match: "ratelimit_server.*.total_requests"
    match_metric_type: gauge
    name: "never_a_counter"
  - match: "ratelimit_server.*.total_requests"
    name: "rl_requests"
    labels: { method: "$1" }
  - match: "ratelimit_server.*.response_time"
    name: "rl_time"
    observer_type: summary
    scale: 0.001
  - match: "ratelimit.service.*"
    name: "first_glob_wins_over_later_regex"
`;

describe('StatsdMapping (statsd_exporter mapping semantics)', () => {
  const m = new StatsdMapping(CONFIG);

  it('maps a glob: each * is one dot-separated field, captures fill name and labels', () => {
    expect(m.map('ratelimit.service.rate_limit.edge.api_key.total_hits', 'counter')).toMatchObject({
      name: 'rl_hits',
      labels: { domain: 'edge', descriptor: 'api_key' },
      scale: 1,
    });
    // Three levels do not match *.*.total_hits; the glob on ratelimit.service.* has one field too few.
    expect(m.map('ratelimit.service.rate_limit.edge.a.b.total_hits', 'counter')).toBeUndefined();
  });

  it('tries regex mappings after every glob, in file order, with ${n} and an out-of-range $n empty', () => {
    expect(m.map('ratelimit.service.rate_limit.edge.path_/login.remote_address.over_limit', 'counter')).toMatchObject({
      name: 'rl_over_limit',
      labels: { domain: 'edge', path: 'path_/login.remote_address', missing: '' },
    });
    expect(m.map('ratelimit.service.config_load_success', 'counter')).toMatchObject({ name: 'first_glob_wins_over_later_regex' });
  });

  it('drops what a drop mapping matches', () => {
    expect(m.map('ratelimit.service.rate_limit.edge.api_key.near_limit', 'counter')).toBe('drop');
  });

  it('honours match_metric_type', () => {
    expect(m.map('ratelimit_server.ShouldRateLimit.total_requests', 'counter')).toMatchObject({
      name: 'rl_requests',
      labels: { method: 'ShouldRateLimit' },
    });
    expect(m.map('ratelimit_server.ShouldRateLimit.total_requests', 'gauge')).toMatchObject({ name: 'never_a_counter' });
  });

  it('takes observer type, scale and the default buckets', () => {
    expect(m.map('ratelimit_server.ShouldRateLimit.response_time', 'observer')).toMatchObject({
      name: 'rl_time',
      scale: 0.001,
      observer: { type: 'summary' },
    });
    const hits = m.map('ratelimit.service.rate_limit.edge.api_key.total_hits', 'observer');
    expect(hits).toMatchObject({ observer: { type: 'histogram', buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10] } });
  });

  it('refuses a mapping without a name, a bad regex or a bad label name, naming PROMETHEUS_MAPPER_YAML', () => {
    expect(() => new StatsdMapping('mappings:\n  - match: "a.*"\n')).toThrow(SettingsError);
    expect(() => new StatsdMapping('mappings:\n  - match: "("\n    match_type: regex\n    name: x\n')).toThrow(
      'invalid value for PROMETHEUS_MAPPER_YAML',
    );
    expect(() => new StatsdMapping('mappings:\n  - match: "a.*"\n    name: x\n    labels: { "1bad": "$1" }\n')).toThrow('invalid label key');
  });

  it('names an unmapped stat as the exporter does', () => {
    expect(escapeMetricName('ratelimit.service.rate_limit.nope.domain_not_found')).toBe('ratelimit_service_rate_limit_nope_domain_not_found');
    expect(escapeMetricName('9lives.a/b')).toBe('_9lives_a_b');
  });
});
