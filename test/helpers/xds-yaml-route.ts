import { join } from 'node:path';
import * as protobuf from 'protobufjs';
import { stringify } from 'yaml';
import { compileRules } from '../../src/config/compile-rules';
import { parseRuleFile } from '../../src/config/parse-rule-file';
import type { RuleSet } from '../../src/config/rule-types';
import type { AnyResource } from '../../src/config/xds/rate-limit-config-resource';
import { protoDir } from '../../src/base/paths';

// The route xDS resources took before they were compiled from the decoded message: proto →
// the rule file the reference would write → the rule-file parser. Kept as the oracle the direct
// route is compared with (test/unit/config/xds-direct-vs-yaml.test.ts): for every resource
// whose metadata keys and numbers YAML cannot garble, both must give the same RuleSet or the
// same error.

const root = new protobuf.Root();
root.resolvePath = (_origin, target) => join(protoDir, target);
root.loadSync('ratelimit/config/ratelimit/v3/rls_conf.proto', { keepCase: true });
export const RateLimitConfigType = root.lookupType('ratelimit.config.ratelimit.v3.RateLimitConfig');

interface ProtoValue {
  readonly kind?: string;
  readonly numberValue?: number;
  readonly stringValue?: string;
  readonly boolValue?: boolean;
  readonly structValue?: ProtoStruct;
  readonly listValue?: { readonly values?: readonly ProtoValue[] };
}
interface ProtoStruct {
  readonly fields?: Readonly<Record<string, ProtoValue>>;
}
interface ProtoPolicy {
  readonly unit: string | number;
  readonly requests_per_unit: number;
  readonly unlimited: boolean;
  readonly name: string;
  readonly replaces: readonly { readonly name: string }[];
}
interface ProtoDescriptor {
  readonly key: string;
  readonly value: string;
  readonly rate_limit?: ProtoPolicy | null;
  readonly descriptors: readonly ProtoDescriptor[];
  readonly shadow_mode: boolean;
  readonly detailed_metric: boolean;
  readonly quota_mode: boolean;
  readonly metadata?: ProtoStruct | null;
}
interface ProtoRateLimitConfig {
  readonly name: string;
  readonly domain: string;
  readonly descriptors: readonly ProtoDescriptor[];
}

function valueToPlain(value: ProtoValue): unknown {
  switch (value.kind) {
    case 'numberValue':
      return value.numberValue;
    case 'stringValue':
      return value.stringValue;
    case 'boolValue':
      return value.boolValue;
    case 'structValue':
      return structToPlain(value.structValue ?? {});
    case 'listValue':
      return (value.listValue?.values ?? []).map(valueToPlain);
    default:
      return null;
  }
}

function structToPlain(struct: ProtoStruct): Record<string, unknown> {
  const plain: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(struct.fields ?? {})) plain[key] = valueToPlain(value);
  return plain;
}

function policyToYaml(policy: ProtoPolicy): Record<string, unknown> {
  return {
    requests_per_unit: policy.requests_per_unit,
    unit: String(policy.unit),
    unlimited: policy.unlimited,
    name: policy.name,
    replaces: policy.replaces.map((replace) => ({ name: replace.name })),
  };
}

function descriptorToYaml(descriptor: ProtoDescriptor): Record<string, unknown> {
  return {
    key: descriptor.key,
    value: descriptor.value,
    ...(descriptor.rate_limit ? { rate_limit: policyToYaml(descriptor.rate_limit) } : {}),
    descriptors: descriptor.descriptors.map(descriptorToYaml),
    shadow_mode: descriptor.shadow_mode,
    detailed_metric: descriptor.detailed_metric,
    quota_mode: descriptor.quota_mode,
    ...(descriptor.metadata ? { metadata: structToPlain(descriptor.metadata) } : {}),
  };
}

/** The rule file's text the YAML route made of one RateLimitConfig. */
export function rateLimitConfigToYaml(config: ProtoRateLimitConfig): string {
  const document = { domain: config.domain, descriptors: config.descriptors.map(descriptorToYaml) };
  return stringify(document, { defaultStringType: 'QUOTE_DOUBLE', defaultKeyType: 'PLAIN' });
}

function decode(resource: AnyResource): ProtoRateLimitConfig {
  const message = RateLimitConfigType.decode(resource.value);
  return RateLimitConfigType.toObject(message, {
    enums: String,
    longs: Number,
    defaults: true,
    arrays: true,
    oneofs: true,
  }) as ProtoRateLimitConfig;
}

/** A snapshot through the YAML route, as compileSnapshot compiled it before. */
export function compileSnapshotThroughYaml(resources: readonly AnyResource[], options: { mergeDomainConfig: boolean }): RuleSet {
  const configs = resources.map(decode).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return compileRules(
    configs.map((config) => parseRuleFile(config.name, rateLimitConfigToYaml(config))),
    options,
  );
}
