import type { DescriptorPlan } from './descriptor-plan';
import type { DescriptorStatus, RateLimitRequest } from './types';

function entryStrings(entries: RateLimitRequest['descriptors'][number]['entries']): string[] {
  return entries.map((e) => e.key + '=' + e.value);
}

/**
 * The reference's RESPONSE_DYNAMIC_METADATA shape: domain, descriptors (entries as `k=v`),
 * hitsAddend when not 1, `metadata` merged from the evaluated quota-mode rules (the first rule
 * wins a clash), and `failed_descriptors` (the over-limit ones) as a JSON string.
 */
export function buildDynamicMetadata(
  request: RateLimitRequest,
  plans: readonly DescriptorPlan[],
  statuses: readonly DescriptorStatus[],
): Record<string, unknown> {
  const out: Record<string, unknown> = {
    domain: request.domain,
    descriptors: request.descriptors.map((d) => ({ entries: entryStrings(d.entries) })),
  };
  if (request.hitsAddend !== 1) out.hitsAddend = request.hitsAddend;
  let metadata: Record<string, unknown> | undefined;
  const failed: unknown[] = [];
  plans.forEach((plan, i) => {
    const rule = plan.rule;
    const status = statuses[i] as DescriptorStatus;
    if (rule === undefined || plan.checkIndex < 0) return;
    if (status.code === 'OVER_LIMIT') {
      failed.push({
        entries: entryStrings((request.descriptors[i] as RateLimitRequest['descriptors'][number]).entries),
        ...(status.currentLimit ? { limit: { requests_per_unit: status.currentLimit.requestsPerUnit, unit: status.currentLimit.unit } } : {}),
        limit_key: rule.fullKey,
      });
    }
    const nodeMetadata = plan.metadata;
    if (rule.quotaMode && nodeMetadata !== undefined) metadata = { ...nodeMetadata, ...metadata };
  });
  if (metadata !== undefined) out.metadata = metadata;
  if (failed.length > 0) out.failed_descriptors = JSON.stringify(failed);
  return out;
}
