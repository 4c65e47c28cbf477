/** The largest uint32: the protobuf fields `requests_per_unit`, the request's `hits_addend` and `limit_remaining` hold no more. */
export const UINT32_MAX = 0xffff_ffff;

/**
 * The most hits one descriptor is counted with: a descriptor's `hits_addend` is a UInt64Value,
 * and a larger value is counted as this many (issue 27; docs/differences.md). Every limit and
 * burst is a uint32, so these hits alone are over any of them: the answer is the one the exact
 * value gets. Up to it the count is the reference's exactly; past it a count that counts every
 * hit (fixed_window) grows by this much per request, and stays an exact integer in JS numbers,
 * Lua's doubles and Redis' int64 for 2^21 such requests a window (2^31 before INCRBY could
 * overflow, as with hits_addend 4,294,967,295 before).
 */
export const HITS_COUNTED_MAX = 2 ** 32;
