import { SettingsError } from '../base/errors';

/** A REDIS_URL with any user info taken out, and the credentials it carried. */
export interface SplitRedisUrl {
  /** The URL without user info: safe to log and to echo in messages. */
  readonly url: string;
  readonly username?: string;
  readonly password?: string;
}

// `redis://user:password@host:port` or `user:password@host:port`: everything up to the last `@`
// of an address is user info (a password may itself contain `@`).
const USER_INFO = /^((?:rediss?:\/\/)?)([^,]*)@([^@,]*)$/;

function decode(part: string, name: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    // The part is a secret: name the variable, never the value.
    throw new SettingsError(`invalid value for ${name}: the user info is not valid percent-encoding (value not shown, it holds a password)`);
  }
}

/** Replaces the user info of every address in `text` by `***`, for messages and logs. */
export function redactUserInfo(text: string): string {
  return text
    .split(',')
    .map((address) => address.replace(USER_INFO, '$1***@$3'))
    .join(',');
}

/**
 * Takes the user info out of a SINGLE REDIS_URL (`redis://[user[:password]@]host:port`), so that
 * the password is sent with AUTH and never becomes part of the host name (which ioredis would put
 * in its connection errors, and those are logged). Address lists (SENTINEL, CLUSTER) must not
 * carry user info: REDIS_AUTH and REDIS_SENTINEL_AUTH hold the passwords there.
 */
export function splitRedisUrl(raw: string, name: string, single: boolean): SplitRedisUrl {
  // A socket path (`/run/redis@6379.sock`) may hold an `@`; it has no user info.
  if (!raw.includes('@') || /^\.{0,2}\//.test(raw)) return { url: raw };
  const safe = redactUserInfo(raw);
  if (!single || raw.includes(',')) {
    throw new SettingsError(`invalid value for ${name}: '${safe}' (an address list cannot carry user info; use the AUTH settings)`);
  }
  const m = USER_INFO.exec(raw.trim());
  if (!m) throw new SettingsError(`invalid value for ${name}: '${safe}' (expected [redis://][user[:password]@]host:port)`);
  const userInfo = m[2] as string;
  const url = `${m[1] as string}${m[3] as string}`;
  const colon = userInfo.indexOf(':');
  const username = decode(colon >= 0 ? userInfo.slice(0, colon) : '', name);
  const password = decode(colon >= 0 ? userInfo.slice(colon + 1) : userInfo, name);
  return { url, ...(username ? { username } : {}), ...(password ? { password } : {}) };
}
