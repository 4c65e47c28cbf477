/** The largest uint32: the protobuf fields `requests_per_unit`, `hits_addend` and `limit_remaining` hold no more. */
export const UINT32_MAX = 0xffff_ffff;
