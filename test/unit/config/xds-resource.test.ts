import { join } from 'node:path';
import * as protobuf from 'protobufjs';
import { describe, expect, it } from 'vitest';
import { compileRules } from '../../../src/config/compile-rules';
import { parseRuleFile } from '../../../src/config/parse-rule-file';
import { compileSnapshot, RATE_LIMIT_CONFIG_TYPE_URL, type AnyResource } from '../../../src/config/xds/rate-limit-config-resource';
import { XdsBackoff } from '../../../src/config/xds/xds-backoff';
import { protoDir } from '../../../src/base/paths';
import { rateLimitConfigToYaml } from '../../helpers/xds-yaml-route';

// RateLimitConfig resources become rules through the rule-file code, so they must compile to
// exactly what the same rules in a file compile to, and fail with the same messages.

const root = new protobuf.Root();
root.resolvePath = (_origin, target) => join(protoDir, target);
root.loadSync('ratelimit/config/ratelimit/v3/rls_conf.proto', { keepCase: true });
const RateLimitConfig = root.lookupType('ratelimit.config.ratelimit.v3.RateLimitConfig');

function resource(config: Record<string, unknown>): AnyResource {
  return { type_url: RATE_LIMIT_CONFIG_TYPE_URL, value: RateLimitConfig.encode(RateLimitConfig.fromObject(config)).finish() };
}

const stringValue = (s: string) => ({ stringValue: s });

const AS_PROTO = {
  name: 'edge',
  domain: 'edge',
  descriptors: [
    { key: 'remote_address', rate_limit: { unit: 'SECOND', requests_per_unit: 10 } },
    {
      key: 'path',
      value: '/api/*',
      detailed_metric: true,
      rate_limit: { unit: 'MINUTE', requests_per_unit: 100, name: 'api' },
      metadata: { fields: { team: stringValue('payments'), tier: { numberValue: 2 } } },
      descriptors: [
        { key: 'method', value: 'POST', shadow_mode: true, rate_limit: { unit: 'HOUR', requests_per_unit: 5, replaces: [{ name: 'api' }] } },
      ],
    },
    // Strings a YAML 1.1 reader would otherwise turn into bools and octal numbers.
    { key: 'yes', value: '0123', quota_mode: true, rate_limit: { unit: 'DAY', requests_per_unit: 1 } },
    { key: 'free', rate_limit: { unlimited: true } },
    { key: 'week', rate_limit: { unit: 'WEEK', requests_per_unit: 7 } },
  ],
};

const AS_FILE = `
domain: edge
descriptors:
  - key: remote_address
    rate_limit: { unit: second, requests_per_unit: 10 }
  - key: path
    value: /api/*
    detailed_metric: true
    rate_limit: { unit: minute, requests_per_unit: 100, name: api }
    metadata: { team: payments, tier: 2 }
    descriptors:
      - key: method
        value: POST
        shadow_mode: true
        rate_limit: { unit: hour, requests_per_unit: 5, replaces: [{ name: api }] }
  - key: "yes"
    value: "0123"
    quota_mode: true
    rate_limit: { unit: day, requests_per_unit: 1 }
  - key: free
    rate_limit: { unlimited: true }
  - key: week
    rate_limit: { unit: week, requests_per_unit: 7 }
`;

describe('RateLimitConfig resources compile as the same rules in a file', () => {
  const fromXds = compileSnapshot([resource(AS_PROTO)], { mergeDomainConfig: false });
  const fromFile = compileRules([parseRuleFile('edge', AS_FILE)], { mergeDomainConfig: false });

  it('gives the same rules', () => {
    expect(fromXds.rules).toEqual(fromFile.rules);
    expect(fromXds.rules.length).toBe(6);
    expect(fromXds.domainCount).toBe(1);
  });

  it('matches requests the same way, metadata and metric keys included', () => {
    const requests = [
      [{ key: 'remote_address', value: '10.0.0.1' }],
      [{ key: 'path', value: '/api/users' }],
      [
        { key: 'path', value: '/api/users' },
        { key: 'method', value: 'POST' },
      ],
      [{ key: 'yes', value: '0123' }],
      [{ key: 'yes', value: '123' }],
      [{ key: 'free', value: 'x' }],
    ];
    for (const entries of requests) {
      const xds = fromXds.match('edge', entries);
      expect(xds).toEqual(fromFile.match('edge', entries));
    }
    expect(fromXds.match('edge', [{ key: 'path', value: '/api/users' }])?.metadata).toEqual({ team: 'payments', tier: 2 });
    expect(fromXds.match('edge', [{ key: 'yes', value: '0123' }])?.rule?.unit).toBe('DAY');
  });

  it('a snapshot of several resources is one rule set, as a directory of files is', () => {
    const two = compileSnapshot(
      [
        resource(AS_PROTO),
        resource({ name: 'b', domain: 'other', descriptors: [{ key: 'k', rate_limit: { unit: 'SECOND', requests_per_unit: 1 } }] }),
      ],
      {
        mergeDomainConfig: false,
      },
    );
    expect(two.domainCount).toBe(2);
    expect(two.hasDomain('other')).toBe(true);
  });

  it('an empty snapshot is no rules', () => {
    expect(compileSnapshot([], { mergeDomainConfig: false }).domainCount).toBe(0);
  });

  it('MERGE_DOMAIN_CONFIG applies across resources as across files', () => {
    const a = resource({ name: 'a', domain: 'd', descriptors: [{ key: 'x', rate_limit: { unit: 'SECOND', requests_per_unit: 1 } }] });
    const b = resource({ name: 'b', domain: 'd', descriptors: [{ key: 'y', rate_limit: { unit: 'SECOND', requests_per_unit: 2 } }] });
    expect(() => compileSnapshot([a, b], { mergeDomainConfig: false })).toThrow("b: duplicate domain 'd' in config file");
    expect(compileSnapshot([a, b], { mergeDomainConfig: true }).rules.map((r) => r.fullKey)).toEqual(['d.x', 'd.y']);
  });
});

describe('a bad resource fails with the message the same file would get, named by the resource', () => {
  const cases: [string, Record<string, unknown>, string][] = [
    [
      'no unit',
      { name: 'r', domain: 'd', descriptors: [{ key: 'k', rate_limit: { requests_per_unit: 1 } }] },
      "r: invalid rate limit unit 'UNKNOWN'",
    ],
    [
      'unit with unlimited',
      { name: 'r', domain: 'd', descriptors: [{ key: 'k', rate_limit: { unit: 'SECOND', unlimited: true } }] },
      'r: should not specify rate limit unit when unlimited',
    ],
    ['empty domain', { name: 'r', domain: '', descriptors: [] }, 'r: config file cannot have empty domain'],
    ['empty key', { name: 'r', domain: 'd', descriptors: [{ key: '' }] }, 'r: descriptor has empty key'],
    ['duplicate key', { name: 'r', domain: 'd', descriptors: [{ key: 'k' }, { key: 'k' }] }, "r: duplicate descriptor composite key 'd.k'"],
    [
      'replaces itself',
      {
        name: 'r',
        domain: 'd',
        descriptors: [{ key: 'k', rate_limit: { unit: 'SECOND', requests_per_unit: 1, name: 'n', replaces: [{ name: 'n' }] } }],
      },
      'r: replaces should not contain name of same descriptor',
    ],
    [
      'empty replaces',
      { name: 'r', domain: 'd', descriptors: [{ key: 'k', rate_limit: { unit: 'SECOND', requests_per_unit: 1, replaces: [{ name: '' }] } }] },
      'r: should not have an empty replaces entry',
    ],
  ];
  for (const [what, config, message] of cases) {
    it(what, () => {
      expect(() => compileSnapshot([resource(config)], { mergeDomainConfig: false })).toThrow(message);
      // The same rules as a file give the same text.
      expect(() =>
        compileRules(
          [
            parseRuleFile(
              'r',
              rateLimitConfigToYaml(
                RateLimitConfig.toObject(RateLimitConfig.fromObject(config), {
                  enums: String,
                  defaults: true,
                  arrays: true,
                  oneofs: true,
                }) as never,
              ),
            ),
          ],
          { mergeDomainConfig: false },
        ),
      ).toThrow(message);
    });
  }

  it('a resource of another type, or bytes that are no RateLimitConfig, reject the snapshot', () => {
    expect(() =>
      compileSnapshot([{ type_url: 'type.googleapis.com/envoy.config.cluster.v3.Cluster', value: new Uint8Array() }], {
        mergeDomainConfig: false,
      }),
    ).toThrow("unexpected resource type 'type.googleapis.com/envoy.config.cluster.v3.Cluster'");
    expect(() =>
      compileSnapshot([{ type_url: RATE_LIMIT_CONFIG_TYPE_URL, value: Uint8Array.from([0x0a, 0xff]) }], { mergeDomainConfig: false }),
    ).toThrow(/^cannot decode RateLimitConfig: /);
  });
});

describe('XdsBackoff: the reference backoff arithmetic (jpillora/backoff)', () => {
  it('with the reference defaults (factor 0.5) every wait is the initial interval', () => {
    const b = new XdsBackoff({ initialMs: 10_000, maxMs: 60_000, factor: 0.5, jitter: true }, () => 0.99);
    expect([b.next(), b.next(), b.next()]).toEqual([10_000, 10_000, 10_000]);
  });

  it('a factor above 1 grows the wait up to the maximum; reset starts over', () => {
    const b = new XdsBackoff({ initialMs: 100, maxMs: 1000, factor: 2, jitter: false });
    expect([b.next(), b.next(), b.next(), b.next(), b.next()]).toEqual([100, 200, 400, 800, 1000]);
    b.reset();
    expect(b.next()).toBe(100);
  });

  it('jitter picks uniformly between the initial interval and the grown wait', () => {
    const b = new XdsBackoff({ initialMs: 100, maxMs: 10_000, factor: 3, jitter: true }, () => 0.5);
    expect([b.next(), b.next(), b.next()]).toEqual([100, 200, 500]);
  });

  it('zero settings take the library defaults; initial at or above max waits max', () => {
    const b = new XdsBackoff({ initialMs: 0, maxMs: 0, factor: 0, jitter: false });
    expect([b.next(), b.next()]).toEqual([100, 200]);
    expect(new XdsBackoff({ initialMs: 5000, maxMs: 1000, factor: 2, jitter: false }).next()).toBe(1000);
  });
});

describe('resource order does not matter: they are taken in name order, as files are', () => {
  const a = resource({ name: 'a', domain: 'd', descriptors: [{ key: 'x', rate_limit: { unit: 'SECOND', requests_per_unit: 1 } }] });
  const b = resource({ name: 'b', domain: 'd', descriptors: [{ key: 'y', rate_limit: { unit: 'SECOND', requests_per_unit: 2 } }] });
  const bad = resource({ name: 'c-bad', domain: 'e', descriptors: [{ key: 'k', rate_limit: { requests_per_unit: 1 } }] });
  const worse = resource({ name: 'd-worse', domain: '', descriptors: [] });

  it('the same rules either way', () => {
    const forward = compileSnapshot([a, b], { mergeDomainConfig: true });
    const backward = compileSnapshot([b, a], { mergeDomainConfig: true });
    expect(backward.rules).toEqual(forward.rules);
    expect(forward.rules.map((r) => r.fullKey)).toEqual(['d.x', 'd.y']);
  });

  it('the same error either way', () => {
    expect(() => compileSnapshot([b, a], { mergeDomainConfig: false })).toThrow("b: duplicate domain 'd' in config file");
    expect(() => compileSnapshot([worse, bad], { mergeDomainConfig: false })).toThrow("c-bad: invalid rate limit unit 'UNKNOWN'");
    expect(() => compileSnapshot([bad, worse], { mergeDomainConfig: false })).toThrow("c-bad: invalid rate limit unit 'UNKNOWN'");
  });
});

describe('metadata keys stay as the Struct wrote them (issue 17 finding 3; the reference is the judge: its xDS provider takes Struct.AsMap(), no YAML)', () => {
  const withMetadata = (fields: Record<string, unknown>) =>
    resource({
      name: 'm',
      domain: 'meta',
      descriptors: [{ key: 'k', rate_limit: { unit: 'SECOND', requests_per_unit: 1 }, metadata: { fields } }],
    });

  it('keys n, yes, 0x10, 1.0, 010 and null stay those strings, nested ones too', () => {
    const fields = Object.fromEntries(['n', 'yes', '0x10', '1.0', '010', 'null'].map((k) => [k, stringValue(k)]));
    const rules = compileSnapshot([withMetadata({ ...fields, inner: { structValue: { fields: { n: stringValue('nested') } } } })], {
      mergeDomainConfig: false,
    });
    expect(rules.match('meta', [{ key: 'k', value: 'v' }])?.metadata).toEqual({
      n: 'n',
      yes: 'yes',
      '0x10': '0x10',
      '1.0': '1.0',
      '010': '010',
      null: 'null',
      inner: { n: 'nested' },
    });
  });

  it('keys yes and on together do not reject the snapshot', () => {
    const rules = compileSnapshot([withMetadata({ yes: stringValue('a'), on: stringValue('b') })], { mergeDomainConfig: false });
    expect(rules.match('meta', [{ key: 'k', value: 'v' }])?.metadata).toEqual({ yes: 'a', on: 'b' });
  });

  it('a number is the double the Struct holds, 2^53 and above included', () => {
    const rules = compileSnapshot([withMetadata({ big: { numberValue: 2 ** 60 }, half: { numberValue: 0.5 } })], { mergeDomainConfig: false });
    expect(rules.match('meta', [{ key: 'k', value: 'v' }])?.metadata).toEqual({ big: 2 ** 60, half: 0.5 });
  });
});

describe('bounds of a snapshot', () => {
  const one = (i: number) =>
    resource({ name: `r${i}`, domain: `d${i}`, descriptors: [{ key: 'k', rate_limit: { unit: 'SECOND', requests_per_unit: 1 } }] });

  it('more resources than XDS_MAX_RESOURCES are refused, naming the bound', () => {
    const three = [one(1), one(2), one(3)];
    expect(compileSnapshot(three, { mergeDomainConfig: false, maxResources: 3 }).domainCount).toBe(3);
    expect(() => compileSnapshot(three, { mergeDomainConfig: false, maxResources: 2 })).toThrow(
      'snapshot has 3 resources, more than the limit of 2 (XDS_MAX_RESOURCES)',
    );
  });

  it('a resource over 512 KiB is refused before it is decoded', () => {
    const descriptors = Array.from({ length: 60_000 }, (_, i) => ({ key: `key_${i}` }));
    const big = resource({ name: 'big', domain: 'big', descriptors });
    expect(big.value.length).toBeGreaterThan(512 * 1024);
    expect(() => compileSnapshot([one(1), big], { mergeDomainConfig: false })).toThrow(
      `resource 2: ${big.value.length} bytes, more than the limit of 524288`,
    );
  });

  it('descriptors nested deeper than 32 are refused with a message, not a stack overflow', () => {
    let nested: Record<string, unknown> = { key: 'leaf' };
    for (let i = 0; i < 40; i++) nested = { key: `k${i}`, descriptors: [nested] };
    expect(() => compileSnapshot([resource({ name: 'deep', domain: 'deep', descriptors: [nested] })], { mergeDomainConfig: false })).toThrow(
      'deep: error loading config file: descriptors or metadata nested more than 32 deep',
    );
  });
});
