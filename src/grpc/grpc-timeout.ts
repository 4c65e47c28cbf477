// The gRPC `grpc-timeout` request header, read on every call (see connection-guard.ts).

/** Milliseconds per unit: Hours, Minutes, Seconds, milliseconds, microseconds, nanoseconds. */
function unitMs(code: number): number | undefined {
  switch (code) {
    case 0x48: // H
      return 3_600_000;
    case 0x4d: // M
      return 60_000;
    case 0x53: // S
      return 1000;
    case 0x6d: // m
      return 1;
    case 0x75: // u
      return 0.001;
    case 0x6e: // n
      return 0.000001;
    default:
      return undefined;
  }
}

/**
 * The `grpc-timeout` header (`<1 to 8 ASCII digits><H|M|S|m|u|n>`) in milliseconds; undefined
 * when absent or malformed. Read a character at a time: a client such as grpc-go sends a new
 * value on every call, and a regex costs a match array and two substrings each time.
 */
export function grpcTimeoutMs(header: string | string[] | undefined): number | undefined {
  if (typeof header !== 'string') return undefined;
  const digits = header.length - 1;
  if (digits < 1 || digits > 8) return undefined;
  const unit = unitMs(header.charCodeAt(digits));
  if (unit === undefined) return undefined;
  let value = 0;
  for (let i = 0; i < digits; i++) {
    const d = header.charCodeAt(i) - 0x30;
    if (d < 0 || d > 9) return undefined;
    value = value * 10 + d;
  }
  return value * unit;
}
