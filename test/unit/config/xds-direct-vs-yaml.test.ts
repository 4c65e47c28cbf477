import { describe, expect, it } from 'vitest';
import type { DescriptorEntry } from '../../../src/domain/descriptor';
import type { RuleSet } from '../../../src/config/rule-types';
import { compileSnapshot, RATE_LIMIT_CONFIG_TYPE_URL, type AnyResource } from '../../../src/config/xds/rate-limit-config-resource';
import { mulberry32 } from '../../helpers/seeded-random';
import { compileSnapshotThroughYaml, RateLimitConfigType } from '../../helpers/xds-yaml-route';

// xDS resources are compiled straight from the decoded message. Before, each went through the
// rule file the reference would write (proto → YAML text → the rule-file parser), which cost
// ~4.7 ms a resource. Both routes must give the same RuleSet (rules, metadata, matches, metric
// keys) or the same error message, for every resource whose metadata YAML cannot garble: keys
// and numbers that YAML 1.1 reads as something else are the defect the direct route fixes
// (issue 17 finding 3, pinned in xds-resource.test.ts), not a behaviour to keep.

const SEED = Number(process.env.XDS_COMPARE_SEED ?? 20_251_126);
const SNAPSHOTS = 400;

type Random = () => number;
const pick = <T>(random: Random, xs: readonly T[]): T => xs[Math.floor(random() * xs.length)] as T;
const chance = (random: Random, p: number): boolean => random() < p;

// Strings that look like other YAML types, or need escaping, in keys, values and names.
const TEXTS = [
  'k',
  'user',
  'path',
  'yes',
  'no',
  'on',
  '0123',
  '0x10',
  '1.0',
  '~',
  'null',
  '*',
  'a*',
  '*b*',
  'x y',
  'é',
  'tab\there',
  'quote"',
  "it's",
  '#c',
  '- d',
  ': e',
  '',
];
const UNITS = ['SECOND', 'MINUTE', 'HOUR', 'DAY', 'WEEK', 'MONTH', 'YEAR', 'UNKNOWN', 99];
// Metadata keys YAML reads as strings either way.
const META_KEYS = ['team', 'tier', 'owner', 'a_b', 'x-y', 'Zeta', 'path/to', 'key with space'];

function metaValue(random: Random, depth: number): Record<string, unknown> {
  const kind = Math.floor(random() * (depth > 2 ? 5 : 7));
  switch (kind) {
    case 0:
      return { stringValue: pick(random, TEXTS) };
    case 1:
      return { numberValue: pick(random, [0, 1, 2, 7.5, -3, 1e6, 123456789, 0.25]) };
    case 2:
      return { boolValue: chance(random, 0.5) };
    case 3:
      return { nullValue: 0 };
    case 4:
      return {};
    case 5:
      return { structValue: metaStruct(random, depth + 1) };
    default:
      return { listValue: { values: Array.from({ length: Math.floor(random() * 3) }, () => metaValue(random, depth + 1)) } };
  }
}

function metaStruct(random: Random, depth: number): Record<string, unknown> {
  const fields: Record<string, unknown> = {};
  for (let i = Math.floor(random() * 4); i > 0; i--) fields[pick(random, META_KEYS)] = metaValue(random, depth);
  return { fields };
}

function policy(random: Random): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (chance(random, 0.95)) out.unit = chance(random, 0.9) ? pick(random, UNITS.slice(0, 7)) : pick(random, UNITS);
  if (chance(random, 0.9)) out.requests_per_unit = pick(random, [0, 1, 5, 100, 4294967295]);
  if (chance(random, 0.08)) out.unlimited = true;
  if (chance(random, 0.3)) out.name = pick(random, ['n1', 'n2', '', 'yes']);
  if (chance(random, 0.15))
    out.replaces = Array.from({ length: 1 + Math.floor(random() * 2) }, () => ({ name: pick(random, ['n1', 'n2', '']) }));
  return out;
}

function descriptor(random: Random, depth: number): Record<string, unknown> {
  const out: Record<string, unknown> = {
    key: chance(random, 0.97)
      ? pick(
          random,
          TEXTS.filter((t) => t !== ''),
        )
      : '',
  };
  if (chance(random, 0.5)) out.value = pick(random, TEXTS);
  if (chance(random, 0.75)) out.rate_limit = policy(random);
  if (depth < 3 && chance(random, 0.3)) out.descriptors = descriptors(random, depth + 1);
  if (chance(random, 0.1)) out.shadow_mode = true;
  if (chance(random, 0.1)) out.detailed_metric = true;
  if (chance(random, 0.1)) out.quota_mode = true;
  if (chance(random, 0.3)) out.metadata = metaStruct(random, 0);
  return out;
}

function descriptors(random: Random, depth: number): Record<string, unknown>[] {
  return Array.from({ length: 1 + Math.floor(random() * 3) }, (_, i) => {
    const d = descriptor(random, depth);
    // Mostly distinct keys per level, so that most snapshots compile; some duplicates stay.
    if (d.key !== '' && chance(random, 0.85)) d.key = `${d.key as string}${i}`;
    return d;
  });
}

function resource(config: Record<string, unknown>): AnyResource {
  return { type_url: RATE_LIMIT_CONFIG_TYPE_URL, value: RateLimitConfigType.encode(RateLimitConfigType.fromObject(config)).finish() };
}

function snapshot(random: Random): { resources: AnyResource[]; configs: Record<string, unknown>[] } {
  const configs = Array.from({ length: 1 + Math.floor(random() * 4) }, (_, i) => ({
    name: pick(random, [`r${i}`, `z${i}`, 'same', 'yes']),
    domain: chance(random, 0.03) ? '' : chance(random, 0.7) ? `d${i}` : pick(random, ['d1', 'd2', 'd3', 'yes']),
    descriptors: descriptors(random, 0),
  }));
  return { resources: configs.map(resource), configs };
}

type Outcome = { error: string } | { rules: RuleSet };

function outcome(compile: () => RuleSet): Outcome {
  try {
    return { rules: compile() };
  } catch (err) {
    return { error: (err as Error).message };
  }
}

/** Requests that reach every node of the configs, and some that reach none. */
function requestsFor(configs: readonly Record<string, unknown>[]): { domain: string; entries: DescriptorEntry[] }[] {
  const out: { domain: string; entries: DescriptorEntry[] }[] = [];
  const walk = (domain: string, list: unknown, prefix: DescriptorEntry[]): void => {
    for (const d of (list as Record<string, unknown>[] | undefined) ?? []) {
      const key = d.key as string;
      const value = (d.value as string | undefined) ?? '';
      for (const v of [value.replaceAll('*', 'zz'), value, 'other']) {
        const entries = [...prefix, { key, value: v }];
        out.push({ domain, entries });
        walk(domain, d.descriptors, entries);
      }
    }
  };
  for (const config of configs) walk(config.domain as string, config.descriptors, []);
  return out;
}

describe(`direct compile of xDS resources = the YAML route (seed ${SEED}, ${SNAPSHOTS} snapshots)`, () => {
  it('the same rules, matches, metadata and metric keys, or the same error', () => {
    const random = mulberry32(SEED);
    let compiled = 0;
    let refused = 0;
    const messages = new Set<string>();
    for (let i = 0; i < SNAPSHOTS; i++) {
      const { resources, configs } = snapshot(random);
      const mergeDomainConfig = chance(random, 0.5);
      const direct = outcome(() => compileSnapshot(resources, { mergeDomainConfig }));
      const viaYaml = outcome(() => compileSnapshotThroughYaml(resources, { mergeDomainConfig }));
      const context = `snapshot ${i}: ${JSON.stringify(configs)}`;
      if ('error' in viaYaml) {
        expect('error' in direct ? direct.error : 'compiled', context).toBe(viaYaml.error);
        refused++;
        messages.add(viaYaml.error.replace(/^[^:]*: /, ''));
        continue;
      }
      expect('rules' in direct, `${context}: ${'error' in direct ? direct.error : ''}`).toBe(true);
      const a = (direct as { rules: RuleSet }).rules;
      const b = viaYaml.rules;
      compiled++;
      expect(a.rules, context).toEqual(b.rules);
      expect(a.domainCount, context).toBe(b.domainCount);
      expect([...a.rulesByDomain.entries()], context).toEqual([...b.rulesByDomain.entries()]);
      for (const { domain, entries } of requestsFor(configs)) {
        expect(a.match(domain, entries), `${context} ${domain} ${JSON.stringify(entries)}`).toEqual(b.match(domain, entries));
        expect(a.trace(domain, entries)).toEqual(b.trace(domain, entries));
      }
    }
    console.log(
      `xDS direct vs YAML route: ${compiled} snapshots compiled alike, ${refused} refused alike; messages: ${[...messages].sort().join(' | ')}`,
    );
    // The generator must exercise both outcomes, and more than one kind of error.
    expect(compiled).toBeGreaterThan(SNAPSHOTS / 10);
    expect(refused).toBeGreaterThan(SNAPSHOTS / 10);
    expect(messages.size).toBeGreaterThan(5);
  });
});
