import { createHash } from 'node:crypto';
import type { LimitSpec } from '../domain/limit-spec';
import type { CounterId, LimitCheck } from './limiter';

// Characters with a meaning in a key: `{` `}` delimit the Redis Cluster hash tag, `:` separates
// parts, `=` separates an entry's key from its value, `%` introduces an escape. Percent-encoding
// them makes the encoding injective (no two descriptors share a key) and keeps every request
// value inside the tag. Lone UTF-16 surrogates are escaped too (`%uD800`): UTF-8 encoding would
// turn all of them into U+FFFD, so two different values would become the same key bytes.
const SPECIAL = /[%{}:=]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
const HAS_SPECIAL = /[%{}:=\uD800-\uDFFF]/;

function escapeChar(c: string): string {
  switch (c) {
    case '%':
      return '%25';
    case '{':
      return '%7B';
    case '}':
      return '%7D';
    case ':':
      return '%3A';
    case '=':
      return '%3D';
    default:
      return '%u' + c.charCodeAt(0).toString(16).toUpperCase();
  }
}

/** Escapes one request-supplied part so that it is ordinary data inside a key. */
export function escapeKeyPart(part: string): string {
  // The cheap test keeps the common case (no special character) free of allocation.
  return HAS_SPECIAL.test(part) ? part.replace(SPECIAL, escapeChar) : part;
}

/**
 * The identity of one counter: `{<domain>:<k1>=<v1>:<k2>=<v2>...}:<algorithm>:<windowSeconds>`.
 * The braces are the Redis Cluster hash tag, so every key of one counter shares a slot while
 * different counters spread over the cluster. The limit is deliberately left out: raising a
 * limit keeps the count, while another algorithm or window starts a fresh counter.
 */
export function counterIdentity(counter: CounterId, spec: LimitSpec): string {
  let tag = escapeKeyPart(counter.domain);
  for (const entry of counter.entries) {
    tag += ':' + escapeKeyPart(entry.key) + '=' + escapeKeyPart(entry.value);
  }
  return '{' + tag + '}:' + spec.algorithm + ':' + spec.windowSeconds;
}

function redisKey(prefix: string, identity: string): string {
  return prefix + 'rl:' + identity;
}

/** The identity of `check`'s counter, built once per check (see LimitCheck.identity). */
export function identityOf(check: LimitCheck): string {
  return (check.identity ??= counterIdentity(check.counter, check.spec));
}

/** The full Redis key of a counter. `prefix` is CACHE_KEY_PREFIX (validated to hold no braces). */
export function counterKey(prefix: string, counter: CounterId, spec: LimitSpec): string {
  return redisKey(prefix, counterIdentity(counter, spec));
}

/**
 * The key of a fixed-window counter's window that holds `nowMs` (lua/lib/fixed_window_step.lua):
 * `<counter key>:<window start, epoch s>`, in the counter's hash slot.
 */
export function fixedWindowKey(counterKey: string, windowSeconds: number, nowMs: number): string {
  const w = windowSeconds * 1000;
  return counterKey + ':' + (nowMs - (nowMs % w)) / 1000;
}

/** counterKey of `check`'s counter, from its memoised identity. */
export function checkKey(prefix: string, check: LimitCheck): string {
  return redisKey(prefix, identityOf(check));
}

// A key is up to 32 entries of 4 KiB values: longer ones are kept as a digest, so an in-process
// state costs the same small key whatever the request carried. SHA-256 keeps distinct
// identities distinct; the `#` cannot start an identity (those start with `{`).
const MAX_PLAIN_KEY_LENGTH = 128;

/** An identity as an in-process map keeps it: itself when short, else a digest of it. */
export function compactIdentity(identity: string): string {
  return identity.length <= MAX_PLAIN_KEY_LENGTH ? identity : '#' + createHash('sha256').update(identity).digest('base64');
}

/** The suffixes of a client's policy keys (lua/policy.lua: KEYS[1..3]). */
const POLICY_PARTS = [':policy:state', ':policy:routes', ':policy:prints'] as const;

/**
 * The three keys of one client's policy state: `rl:{<domain>:<clientKey>=<client>}:policy:<part>`.
 * The hash tag is the client, so one script call reaches all of them; `policy` is no algorithm
 * name, so they never meet a counter's key (whose tag may be the same).
 */
export function policyKeys(prefix: string, domain: string, clientKey: string, client: string): [string, string, string] {
  const base = prefix + 'rl:' + policyIdentity(domain, clientKey, client);
  return [base + POLICY_PARTS[0], base + POLICY_PARTS[1], base + POLICY_PARTS[2]];
}

/** The identity of one client's policy state, `{<domain>:<clientKey>=<client>}`: its keys' hash tag. */
export function policyIdentity(domain: string, clientKey: string, client: string): string {
  return '{' + escapeKeyPart(domain) + ':' + escapeKeyPart(clientKey) + '=' + escapeKeyPart(client) + '}';
}
