// Redis Cluster key → slot: CRC16/XMODEM (poly 0x1021, init 0) of the hash tag, mod 16384.
const TABLE = (() => {
  const table = new Uint16Array(256);
  for (let byte = 0; byte < 256; byte++) {
    let crc = byte << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    table[byte] = crc;
  }
  return table;
})();

/** CRC16/XMODEM of `data` (a string is hashed as its UTF-8 bytes). */
export function crc16(data: string | Uint8Array): number {
  const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
  let crc = 0;
  for (const b of bytes) crc = ((crc << 8) & 0xffff) ^ (TABLE[((crc >> 8) ^ b) & 0xff] ?? 0);
  return crc;
}

/**
 * The hash tag Redis Cluster hashes: the bytes between the first `{` and the next `}` when that
 * is non-empty, otherwise the whole key.
 */
export function hashTag(key: string | Uint8Array): Uint8Array {
  const bytes = typeof key === 'string' ? Buffer.from(key, 'utf8') : Buffer.from(key);
  const open = bytes.indexOf(0x7b);
  if (open < 0) return bytes;
  const close = bytes.indexOf(0x7d, open + 1);
  if (close < 0 || close === open + 1) return bytes;
  return bytes.subarray(open + 1, close);
}

/** The cluster slot (0..16383) of a key, as `CLUSTER KEYSLOT` computes it. */
export function keySlot(key: string | Uint8Array): number {
  return crc16(hashTag(key)) % 16384;
}
