import { join } from 'node:path';
import * as protobuf from 'protobufjs';
import { stringify } from 'yaml';
import { ConfigError } from '../../errors';
import { protoDir } from '../../paths';
import { compileRules } from '../compile-rules';
import { parseRuleFile } from '../parse-rule-file';
import type { RuleSet } from '../rule-types';

/** The xDS resource type the reference's config provider subscribes to. */
export const RATE_LIMIT_CONFIG_TYPE_URL = 'type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig';

/** One `google.protobuf.Any` of a DiscoveryResponse, as proto-loader decodes it. */
export interface AnyResource {
  readonly type_url: string;
  readonly value: Uint8Array;
}

let rateLimitConfigType: protobuf.Type | undefined;

function loadRateLimitConfigType(): protobuf.Type {
  if (rateLimitConfigType) return rateLimitConfigType;
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => join(protoDir, target);
  root.loadSync('ratelimit/config/ratelimit/v3/rls_conf.proto', { keepCase: true });
  rateLimitConfigType = root.lookupType('ratelimit.config.ratelimit.v3.RateLimitConfig');
  return rateLimitConfigType;
}

// ---- the decoded message, as protobufjs' toObject gives it (keepCase, enums as names) ----

interface ProtoValue {
  readonly kind?: 'nullValue' | 'numberValue' | 'stringValue' | 'boolValue' | 'structValue' | 'listValue';
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

// ---- proto → the rule file the reference builds from it ----

/**
 * The same fields, in the same form, as the reference's ConfigXdsProtoToYaml: the unit is the
 * enum's name (UNKNOWN when unset, which the rule checks then reject as a file's would).
 */
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

/**
 * A rule file's text for one RateLimitConfig. Going through the file parser means a resource
 * is checked by exactly the code and messages a file is; every string is double-quoted so no
 * YAML 1.1 resolution (`yes`, `0123`) can change what the proto said.
 */
export function rateLimitConfigToYaml(config: ProtoRateLimitConfig): string {
  const document = { domain: config.domain, descriptors: config.descriptors.map(descriptorToYaml) };
  return stringify(document, { defaultStringType: 'QUOTE_DOUBLE', defaultKeyType: 'PLAIN' });
}

function decodeResource(resource: AnyResource): ProtoRateLimitConfig {
  if (resource.type_url !== RATE_LIMIT_CONFIG_TYPE_URL) {
    throw new ConfigError(`unexpected resource type '${resource.type_url}' (expected ${RATE_LIMIT_CONFIG_TYPE_URL})`);
  }
  const type = loadRateLimitConfigType();
  try {
    const message = type.decode(resource.value);
    return type.toObject(message, { enums: String, longs: Number, defaults: true, arrays: true, oneofs: true }) as ProtoRateLimitConfig;
  } catch (err) {
    throw new ConfigError(`cannot decode RateLimitConfig: ${(err as Error).message}`, { cause: err });
  }
}

/**
 * A whole state-of-the-world snapshot → one RuleSet; any bad resource rejects the snapshot.
 * Each resource is validated as the rule file it stands for, named by the resource's name.
 * The resources are taken in name order, as the files of a directory are: a management server
 * may list them in any order (go-control-plane's differs from one response to the next), and
 * the order decides which one an error names and how merged domains combine.
 */
export function compileSnapshot(resources: readonly AnyResource[], options: { mergeDomainConfig: boolean }): RuleSet {
  const configs = resources.map(decodeResource).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return compileRules(
    configs.map((config) => parseRuleFile(config.name, rateLimitConfigToYaml(config))),
    options,
  );
}
