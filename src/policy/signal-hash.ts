/**
 * A route or fingerprint as a number in 1..2^32 (FNV-1a over the UTF-16 code units, plus one so
 * that 0 can mean "none"). Redis keeps small sets of such integers as an intset (4 bytes per
 * member), far smaller than the strings or a HyperLogLog; two values that collide count as
 * one, which errs on the lenient side. No allocation.
 */
export function signalHash(value: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < value.length; i++) {
    h ^= value.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) + 1;
}
