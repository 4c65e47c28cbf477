import { SettingsError } from '../base/errors';

/** Readers for environment values. Each failure names the variable and the value, once. */
export type Env = Readonly<Record<string, string | undefined>>;

function bad(name: string, value: string, expected: string): SettingsError {
  return new SettingsError(`invalid value for ${name}: '${value}' (expected ${expected})`);
}

function raw(env: Env, name: string): string | undefined {
  const v = env[name];
  return v === undefined || v === '' ? undefined : v;
}

export function str(env: Env, name: string, fallback: string): string {
  return raw(env, name) ?? fallback;
}

// The reference parses booleans with Go's strconv.ParseBool; accept exactly the same spellings.
const TRUE = new Set(['1', 't', 'T', 'TRUE', 'true', 'True']);
const FALSE = new Set(['0', 'f', 'F', 'FALSE', 'false', 'False']);

export function bool(env: Env, name: string, fallback: boolean): boolean {
  const v = raw(env, name);
  if (v === undefined) return fallback;
  if (TRUE.has(v)) return true;
  if (FALSE.has(v)) return false;
  throw bad(name, v, 'true or false');
}

export function int(env: Env, name: string, fallback: number, min: number, max: number): number {
  const v = raw(env, name);
  if (v === undefined) return fallback;
  if (!/^-?\d+$/.test(v.trim())) throw bad(name, v, `an integer from ${min} to ${max}`);
  const n = Number(v.trim());
  if (!Number.isSafeInteger(n) || n < min || n > max) throw bad(name, v, `an integer from ${min} to ${max}`);
  return n;
}

export function float(env: Env, name: string, fallback: number, min: number, max: number): number {
  const v = raw(env, name);
  if (v === undefined) return fallback;
  const n = Number(v.trim());
  if (v.trim() === '' || !Number.isFinite(n) || n < min || n > max) {
    throw bad(name, v, `a number from ${min} to ${max}`);
  }
  return n;
}

export function port(env: Env, name: string, fallback: number): number {
  return int(env, name, fallback, 0, 65535);
}

export function oneOf<T extends string>(env: Env, name: string, fallback: T, allowed: readonly T[]): T {
  const v = raw(env, name);
  if (v === undefined) return fallback;
  const found = allowed.find((a) => a.toLowerCase() === v.trim().toLowerCase());
  if (found === undefined) throw bad(name, v, `one of ${allowed.join(', ')}`);
  return found;
}

const DURATION_UNITS_MS: Readonly<Record<string, number>> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

/** Go duration syntax (`10s`, `1m30s`, `250ms`, `0`), as the reference's settings use, in ms. */
export function duration(env: Env, name: string, fallbackMs: number): number {
  const v = raw(env, name);
  if (v === undefined) return fallbackMs;
  const text = v.trim();
  if (text === '0') return 0;
  const part = /(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/y;
  let total = 0;
  let pos = 0;
  while (pos < text.length) {
    part.lastIndex = pos;
    const m = part.exec(text);
    if (!m) throw bad(name, v, 'a duration such as 500ms, 10s or 1m');
    total += Number(m[1]) * (DURATION_UNITS_MS[m[2] as string] as number);
    pos = part.lastIndex;
  }
  if (text.length === 0) throw bad(name, v, 'a duration such as 500ms, 10s or 1m');
  return total;
}

/**
 * A listen host: a name or an IP address, IPv6 without brackets (`::`, `::1`), as the reference
 * reads HOST, GRPC_HOST and DEBUG_HOST. A bracketed `[::]` is refused, as the reference refuses it.
 */
export function listenHost(env: Env, name: string, fallback: string): string {
  const v = str(env, name, fallback);
  if (v.startsWith('[') || v.endsWith(']')) {
    throw bad(name, v, `a host name or IP address without brackets, e.g. '${v.replace(/^\[|\]$/g, '')}'`);
  }
  return v;
}

/** `host:port` or `:port` (Go listen-address form); an empty host means all interfaces. */
export function listenAddress(env: Env, name: string, fallback: string): { host: string; port: number } {
  const v = str(env, name, fallback);
  const m = /^(.*):(\d{1,5})$/.exec(v);
  const p = m ? Number(m[2]) : NaN;
  if (!m || p > 65535) throw bad(name, v, 'host:port or :port');
  const host = (m[1] ?? '').replace(/^\[(.*)\]$/, '$1');
  return { host: host === '' ? '0.0.0.0' : host, port: p };
}

/** A comma-separated list, as envconfig reads a []string (empty items dropped). */
export function list(env: Env, name: string): string[] {
  const v = raw(env, name);
  if (v === undefined) return [];
  return v
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

/** `key:value,key2:value2`, as envconfig reads a map[string]string: each item is exactly one key and one value. */
export function stringMap(env: Env, name: string): Array<[string, string]> {
  const v = raw(env, name);
  if (v === undefined) return [];
  return v.split(',').map((item) => {
    const parts = item.split(':');
    if (parts.length !== 2) throw bad(name, v, `key:value pairs separated by commas (bad item '${item}')`);
    return [parts[0] as string, parts[1] as string];
  });
}

/** Longest Go duration we accept where Node timers are used (setTimeout's limit, ~24.8 days). */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** A Go duration above 0 that a Node timer can wait. */
export function positiveDuration(env: Env, name: string, fallbackMs: number): number {
  const ms = duration(env, name, fallbackMs);
  if (ms <= 0 || ms > MAX_TIMER_MS)
    throw new SettingsError(`invalid value for ${name}: '${env[name]}' (expected a duration above 0 and at most 596h)`);
  return ms;
}
