/**
 * A route or fingerprint as a number in 1..2^31-1 (31 bits of FNV-1a over the UTF-16 code
 * units; 0, which means "none", becomes 1). Redis keeps small sets of such integers as an
 * intset of 32-bit members (4 bytes each), smaller than the strings or a HyperLogLog and exact,
 * so that the memory store gives the same counts; two values that collide count as one, which
 * errs on the lenient side. No allocation.
 */
export function signalHash(value: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < value.length; i++) {
    h ^= value.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 1 || 1;
}
