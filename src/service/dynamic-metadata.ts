import type { DescriptorStatus, LimitOverride, RateLimitRequest, RequestDescriptor } from './types';

type JsonMap = Record<string, unknown>;

function isMap(v: unknown): v is JsonMap {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Own data property, so that a metadata key named `__proto__` stays plain data. */
function setOwn(obj: JsonMap, key: string, value: unknown): void {
  Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
}

/** A copy of every nested map (lists and scalars are never written to, so they are shared). */
function copyMaps(v: unknown): unknown {
  if (!isMap(v)) return v;
  const out: JsonMap = {};
  for (const [k, inner] of Object.entries(v)) setOwn(out, k, copyMaps(inner));
  return out;
}

/**
 * The reference's mergeMetadata: a new key is added; when both sides hold a map at a key they
 * merge recursively; otherwise the value already there wins. `dest` is always our own fresh
 * copy: the reference writes into the first rule's configured metadata here, which then grows
 * across requests.
 */
function mergeInto(dest: JsonMap, src: Readonly<JsonMap>): void {
  for (const [k, v] of Object.entries(src)) {
    if (!Object.prototype.hasOwnProperty.call(dest, k)) {
      setOwn(dest, k, copyMaps(v));
      continue;
    }
    const existing = dest[k];
    if (isMap(existing) && isMap(v)) mergeInto(existing, v);
  }
}

/**
 * The override as Go's generated `String()` prints it: protobuf text format on one line, fields
 * in number order, a field at its default (requests_per_unit 0) left out. (Go may add a second
 * space between fields depending on the binary; one space is the canonical form.)
 */
export function limitOverrideText(limit: LimitOverride): string {
  // Envoy's request enum has no name for WEEK (7): Go prints such a value as its number.
  const unit = 'unit:' + (limit.unit === 'WEEK' ? '7' : limit.unit);
  return limit.requestsPerUnit === 0 ? unit : `requests_per_unit:${limit.requestsPerUnit} ${unit}`;
}

function descriptorStruct(d: RequestDescriptor, limits: readonly DescriptorStatus[] | undefined): JsonMap {
  const out: JsonMap = { entries: d.entries.map((e) => e.key + '=' + e.value) };
  if (d.limit !== undefined) out.limit = limitOverrideText(d.limit);
  if (d.hitsAddend !== undefined) out.hitsAddend = d.hitsAddend;
  if (limits !== undefined) out.limits = limits.map(limitStruct);
  return out;
}

/** One limit of a `rate_limits` list (ours, issue 21): its limit and its own answer. */
function limitStruct(s: DescriptorStatus): JsonMap {
  const limit = s.currentLimit;
  return {
    ...(limit?.name !== undefined && { name: limit.name }),
    requestsPerUnit: limit?.requestsPerUnit ?? 0,
    unit: limit?.unit ?? 'UNKNOWN',
    code: s.code,
    limitRemaining: s.limitRemaining,
    durationUntilResetSeconds: s.durationUntilResetSeconds,
  };
}

/**
 * RESPONSE_DYNAMIC_METADATA as the reference's ratelimitToMetadata builds it: `domain`;
 * `descriptors` (entries as `k=v`, the descriptor's `limit` override and `hitsAddend` when it
 * carries them); `hitsAddend` when the request's is not 0; and `metadata`, the merge of the
 * metadata of the rules whose descriptors passed, in descriptor order, absent when empty. Ours:
 * a descriptor with a `rate_limits` list also carries `limits`, each limit's answer.
 */
export function buildDynamicMetadata(
  request: RateLimitRequest,
  passedRulesMetadata: readonly Readonly<JsonMap>[],
  lists?: readonly (readonly DescriptorStatus[] | undefined)[],
): JsonMap {
  const out: JsonMap = {
    domain: request.domain,
    descriptors: request.descriptors.map((d, i) => descriptorStruct(d, lists?.[i])),
  };
  const hitsAddend = request.hitsAddendAsSent ?? request.hitsAddend;
  if (hitsAddend !== 0) out.hitsAddend = hitsAddend;
  const merged: JsonMap = {};
  for (const metadata of passedRulesMetadata) mergeInto(merged, metadata);
  if (Object.keys(merged).length > 0) out.metadata = merged;
  return out;
}
