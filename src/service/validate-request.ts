import { InvalidRequestError } from '../base/errors';
import type { RateLimitRequest } from './types';

/** Limits on one request's size; a request over them is INVALID_ARGUMENT. */
export interface RequestLimits {
  readonly maxDescriptors: number;
  readonly maxEntries: number;
  readonly maxKeyBytes: number;
  readonly maxValueBytes: number;
  /**
   * MAX_COUNTERS_PER_REQUEST: the counters one request may need across all its descriptors and
   * `rate_limits` lists (issue 26); default {@link DEFAULT_MAX_COUNTERS_PER_REQUEST}.
   */
  readonly maxCounters?: number;
}

/**
 * Four times what a reference user can send (one counter per descriptor, 64 descriptors at
 * MAX_DESCRIPTORS_PER_REQUEST's default); 16 full `rate_limits` lists. Each counter is a key and
 * a script step in Redis: a request of 64 descriptors on a 2,000-limit list made 128,000.
 */
export const DEFAULT_MAX_COUNTERS_PER_REQUEST = 256;

/**
 * Rejects requests that cannot be answered honestly or that are too large to count. The
 * reference answers some of these with a plain error and crashes on others.
 */
export function validateRequest(request: RateLimitRequest, limits: RequestLimits): void {
  if (request.domain === '') throw new InvalidRequestError('rate limit domain must not be empty');
  const descriptors = request.descriptors;
  if (descriptors.length === 0) throw new InvalidRequestError('rate limit descriptor list must not be empty');
  if (descriptors.length > limits.maxDescriptors) {
    throw new InvalidRequestError(`too many descriptors: ${descriptors.length} (at most ${limits.maxDescriptors})`);
  }
  if (Buffer.byteLength(request.domain) > limits.maxValueBytes) {
    throw new InvalidRequestError(`domain is longer than ${limits.maxValueBytes} bytes`);
  }
  for (let i = 0; i < descriptors.length; i++) {
    const entries = (descriptors[i] as RateLimitRequest['descriptors'][number]).entries;
    if (entries.length > limits.maxEntries) {
      throw new InvalidRequestError(`descriptor ${i} has too many entries: ${entries.length} (at most ${limits.maxEntries})`);
    }
    for (const entry of entries) {
      // String length bounds the UTF-8 size from below and by 3x from above: measure only when close.
      if (entry.key.length * 3 > limits.maxKeyBytes && Buffer.byteLength(entry.key) > limits.maxKeyBytes) {
        throw new InvalidRequestError(`descriptor ${i} has a key longer than ${limits.maxKeyBytes} bytes`);
      }
      if (entry.value.length * 3 > limits.maxValueBytes && Buffer.byteLength(entry.value) > limits.maxValueBytes) {
        throw new InvalidRequestError(`descriptor ${i} has a value longer than ${limits.maxValueBytes} bytes (key '${entry.key.slice(0, 64)}')`);
      }
    }
  }
}
