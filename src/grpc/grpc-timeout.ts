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

/** grpc-js' server reads `grpc-timeout` with this, unanchored: the first match anywhere counts. */
const GRPC_JS_TIMEOUT = /(\d{1,8})\s*([HMSmun])/;
/** What grpc-js' Metadata takes as a value (printable ASCII): anything else drops the header. */
const LEGAL_VALUE = /^[ -~]*$/;

/**
 * A call's timeout in whole milliseconds as grpc-js' server reads it (server-interceptors.js
 * handleTimeoutHeader), so that both handlers answer alike: `absent` for no header or one
 * grpc-js' Metadata drops (not printable ASCII), `invalid` when nothing in it reads as a timeout
 * (grpc-js answers INTERNAL). The first `<1 to 8 digits><spaces><unit>` anywhere in it counts:
 * `5 S`, `5S, 6S` (a repeated header, joined by node) and `123456789m` (read from its second
 * digit) all pass. The milliseconds are `| 0`, as grpc-js has them: past 2^31-1 they wrap, often
 * negative (`700H` is a deadline already passed), never beyond what setTimeout takes.
 * The well-formed header a client sends is read without a regex (grpcTimeoutMs).
 */
export function grpcJsTimeoutMs(header: string | string[] | undefined): number | 'absent' | 'invalid' {
  const value = Array.isArray(header) ? header[0] : header;
  if (value === undefined) return 'absent';
  const strict = grpcTimeoutMs(value);
  if (strict !== undefined) return strict | 0;
  if (!LEGAL_VALUE.test(value)) return 'absent';
  const m = GRPC_JS_TIMEOUT.exec(value);
  if (m === null) return 'invalid';
  return (Number(m[1]) * (unitMs(m[2]!.charCodeAt(0)) as number)) | 0;
}
