import { join } from 'node:path';
import * as protobuf from 'protobufjs';
import { ConfigError } from '../../base/errors';
import { protoDir } from '../../base/paths';
import { checkRules, deepFreeze, type DomainConfig, type RawDescriptor, type RawRateLimit } from '../check-rules';
import { RuleSetBuilder } from '../compile-rules';
import { MAX_RULE_FILE_BYTES } from '../parse-rule-file';
import type { RuleSet } from '../rule-types';
import { runToEnd } from './time-slices';

/** The xDS resource type the reference's config provider subscribes to. */
export const RATE_LIMIT_CONFIG_TYPE_URL = 'type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig';

/** One `google.protobuf.Any` of a DiscoveryResponse, as proto-loader decodes it. */
export interface AnyResource {
  readonly type_url: string;
  readonly value: Uint8Array;
}

/**
 * A resource is decoded in one piece, synchronously; this bounds the time that takes (a few ms)
 * as the same bound bounds a rule file's parse. A resource of this size holds tens of thousands
 * of descriptors.
 */
export const MAX_RESOURCE_BYTES = MAX_RULE_FILE_BYTES;

/**
 * Descriptors and metadata nested deeper than this are refused rather than walked recursively
 * (a rule file could not nest them deeper either: its YAML is read to depth 64).
 */
export const MAX_NESTING = 32;

interface RateLimitConfigTypes {
  readonly config: protobuf.Type;
  readonly unitNames: Readonly<Record<number, string>>;
}

let types: RateLimitConfigTypes | undefined;

function loadTypes(): RateLimitConfigTypes {
  if (types) return types;
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => join(protoDir, target);
  root.loadSync('ratelimit/config/ratelimit/v3/rls_conf.proto', { keepCase: true });
  types = {
    config: root.lookupType('ratelimit.config.ratelimit.v3.RateLimitConfig'),
    unitNames: root.lookupEnum('ratelimit.config.ratelimit.v3.RateLimitUnit').valuesById,
  };
  return types;
}

// ---- the decoded message, as protobufjs' decode gives it (keepCase; unset fields read their defaults) ----

interface ProtoValue {
  /** The oneof's field that is set, if any. */
  readonly kind?: 'nullValue' | 'numberValue' | 'stringValue' | 'boolValue' | 'structValue' | 'listValue';
  readonly numberValue: number;
  readonly stringValue: string;
  readonly boolValue: boolean;
  readonly structValue: ProtoStruct | null;
  readonly listValue: { readonly values: readonly ProtoValue[] } | null;
}

interface ProtoStruct {
  readonly fields: Readonly<Record<string, ProtoValue>>;
}

interface ProtoPolicy {
  readonly unit: number;
  readonly requests_per_unit: number;
  readonly unlimited: boolean;
  readonly name: string;
  readonly replaces: readonly { readonly name: string }[];
}

interface ProtoDescriptor {
  readonly key: string;
  readonly value: string;
  readonly rate_limit: ProtoPolicy | null;
  readonly descriptors: readonly ProtoDescriptor[];
  readonly shadow_mode: boolean;
  readonly detailed_metric: boolean;
  readonly quota_mode: boolean;
  readonly metadata: ProtoStruct | null;
}

interface ProtoRateLimitConfig {
  readonly name: string;
  readonly domain: string;
  readonly descriptors: readonly ProtoDescriptor[];
}

// ---- the message → the fields a rule file's checks take, as the reference's ConfigXdsProtoToYaml builds them ----

type Fail = (message: string) => never;

function nestedTooDeep(fail: Fail): never {
  return fail(`error loading config file: descriptors or metadata nested more than ${MAX_NESTING} deep`);
}

/** Struct → plain data as the reference's `AsMap` gives it: every key as written, numbers as doubles. */
function structToPlain(struct: ProtoStruct, depth: number, fail: Fail): Record<string, unknown> {
  if (depth > MAX_NESTING) nestedTooDeep(fail);
  const plain: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(struct.fields)) {
    // defineProperty, not assignment: a key named `__proto__` must stay plain data.
    Object.defineProperty(plain, key, { value: valueToPlain(value, depth + 1, fail), enumerable: true, writable: true, configurable: true });
  }
  return plain;
}

function valueToPlain(value: ProtoValue, depth: number, fail: Fail): unknown {
  if (depth > MAX_NESTING) nestedTooDeep(fail);
  switch (value.kind) {
    case 'numberValue':
      return value.numberValue;
    case 'stringValue':
      return value.stringValue;
    case 'boolValue':
      return value.boolValue;
    case 'structValue':
      return structToPlain(value.structValue as ProtoStruct, depth + 1, fail);
    case 'listValue':
      return (value.listValue as { values: readonly ProtoValue[] }).values.map((item) => valueToPlain(item, depth + 1, fail));
    default:
      return null;
  }
}

/** The unit is the enum's name (UNKNOWN when unset, which the checks then refuse as a file's would); an unknown number prints as the number, as Go's String() does. */
function rawRateLimit(policy: ProtoPolicy): RawRateLimit {
  return {
    requestsPerUnit: policy.requests_per_unit,
    unit: loadTypes().unitNames[policy.unit] ?? String(policy.unit),
    unlimited: policy.unlimited,
    name: policy.name,
    replaces: policy.replaces.map((replace) => replace.name),
    // The proto has none of floodgate's extensions: their defaults.
    algorithm: '',
  };
}

function rawDescriptor(descriptor: ProtoDescriptor, depth: number, fail: Fail): RawDescriptor {
  if (depth > MAX_NESTING) nestedTooDeep(fail);
  return {
    key: descriptor.key,
    value: descriptor.value,
    ...(descriptor.rate_limit && { rateLimit: rawRateLimit(descriptor.rate_limit) }),
    descriptors: descriptor.descriptors.map((child) => rawDescriptor(child, depth + 1, fail)),
    shadowMode: descriptor.shadow_mode,
    quotaMode: descriptor.quota_mode,
    detailedMetric: descriptor.detailed_metric,
    valueToMetric: false,
    shareThreshold: false,
    ...(descriptor.metadata && { metadata: structToPlain(descriptor.metadata, depth + 1, fail) }),
  };
}

/**
 * One RateLimitConfig → the validated config a rule file with the same rules gives: the same
 * checks (`checkRules`), the same messages, named by the resource's name.
 */
export function rateLimitConfigToDomainConfig(config: ProtoRateLimitConfig): DomainConfig {
  const fail = (message: string): never => {
    throw new ConfigError(`${config.name}: ${message}`);
  };
  const raw = { domain: config.domain, descriptors: config.descriptors.map((d) => rawDescriptor(d, 1, fail)) };
  return deepFreeze({ fileName: config.name, domain: config.domain, descriptors: checkRules(raw, fail) });
}

function decodeResource(resource: AnyResource, index: number): ProtoRateLimitConfig {
  if (resource.type_url !== RATE_LIMIT_CONFIG_TYPE_URL) {
    throw new ConfigError(`unexpected resource type '${resource.type_url}' (expected ${RATE_LIMIT_CONFIG_TYPE_URL})`);
  }
  if (resource.value.length > MAX_RESOURCE_BYTES) {
    throw new ConfigError(`resource ${index + 1}: ${resource.value.length} bytes, more than the limit of ${MAX_RESOURCE_BYTES}`);
  }
  try {
    return loadTypes().config.decode(resource.value) as unknown as ProtoRateLimitConfig;
  } catch (err) {
    throw new ConfigError(`cannot decode RateLimitConfig: ${(err as Error).message}`, { cause: err });
  }
}

export interface SnapshotOptions {
  readonly mergeDomainConfig: boolean;
  /** XDS_MAX_RESOURCES: a snapshot with more is refused before anything is decoded. */
  readonly maxResources: number;
}

/**
 * A whole state-of-the-world snapshot → one RuleSet, as steps: the generator yields after each
 * resource decoded, checked or added, so a caller can spread the work over turns of the event
 * loop (`runInSlices`). Any bad resource rejects the snapshot.
 *
 * Each resource is checked as the rule file it stands for, named by the resource's name. The
 * resources are taken in name order, as the files of a directory are: a management server may
 * list them in any order (go-control-plane's differs from one response to the next), and the
 * order decides which one an error names and how merged domains combine. As for files, every
 * resource is checked before any is added, so a bad rule is reported before a duplicate domain.
 */
export function* snapshotSteps(resources: readonly AnyResource[], options: SnapshotOptions): Generator<void, RuleSet> {
  if (resources.length > options.maxResources) {
    throw new ConfigError(`snapshot has ${resources.length} resources, more than the limit of ${options.maxResources} (XDS_MAX_RESOURCES)`);
  }
  const messages: ProtoRateLimitConfig[] = [];
  for (const [index, resource] of resources.entries()) {
    messages.push(decodeResource(resource, index));
    yield;
  }
  messages.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const configs: DomainConfig[] = [];
  for (const message of messages) {
    configs.push(rateLimitConfigToDomainConfig(message));
    yield;
  }
  const builder = new RuleSetBuilder(options);
  for (const config of configs) {
    builder.add(config);
    yield;
  }
  return builder.build();
}

/** `snapshotSteps` in one go (tests, tools). */
export function compileSnapshot(
  resources: readonly AnyResource[],
  options: Pick<SnapshotOptions, 'mergeDomainConfig'> & Partial<SnapshotOptions>,
): RuleSet {
  return runToEnd(snapshotSteps(resources, { maxResources: Number.POSITIVE_INFINITY, ...options }));
}
