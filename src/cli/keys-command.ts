import Redis, { Cluster, type RedisOptions } from 'ioredis';
import { createRedisClient } from '../limiter/redis/redis-client';
import type { KeyLayout } from '../limiter/reference-key';
import { redactUserInfo } from '../settings/redis-url-credentials';
import { referenceDomainsOf, type ReferenceDomains } from '../redis-keys/key-shape';
import { scanCounterKeys, scanTargets, type ScanReport } from '../redis-keys/scan-keys';
import { loadRulesLikeServer } from './check-command';
import { loadSettings } from '../settings/settings';
import { EXIT_FINDINGS, EXIT_OK, EXIT_USAGE, UsageError, intOption, parseArgs, stringOption, type CliIo } from './cli-io';

export const KEYS_USAGE = `usage: floodgate keys [--redis <url> [--cluster | --sentinel]] [--fix [--fix-unknown]] [options]

Walks every counter key under the prefix with SCAN, a bounded COUNT per call and a pause
between calls, and reports keys without a TTL and keys of an unknown shape (not
'<prefix>rl:{...}:<algorithm>:<seconds>', for a fixed window also with ':<window start>',
holding its algorithm's type, nor a policy key '<prefix>rl:{...}:policy:state|routes|prints').
In the shared layout (REDIS_KEY_LAYOUT=reference) the reference's keys,
'<prefix><domain>_<key>_<value>_..._<window start>' holding a count, are walked too (every key
under the prefix): a key is one only when its domain is one of the rules' (--domain, else the
rules of --rules or of the service's RUNTIME_* settings) and its window start is aligned to one
of that domain's units, not in the future and at most a year old; no domain known, no key is
taken for the reference's. Other keys there are left alone and not reported. Control characters in key names are shown
escaped (\\n, \\xHH). Exits 0 when nothing is left to report, 1 otherwise, 2 when Redis
cannot be reached.

  --redis URL      redis://[user:pass@]host:port, host:port, or a unix socket path
                   (default: REDIS_URL, REDIS_TYPE and their AUTH and TLS settings, as the service reads them)
  --cluster        URL is a seed of a Redis Cluster: scan every master
  --sentinel       URL is master,host:port[,host:port...] (REDIS_URL of REDIS_TYPE SENTINEL):
                   scan the master the sentinels name
  --prefix P       CACHE_KEY_PREFIX (default: $CACHE_KEY_PREFIX)
  --layout L       floodgate or reference: the key layout counted in (default: $REDIS_KEY_LAYOUT)
  --domain D[,D]   with the reference layout: the domains whose reference keys to judge
  --rules DIR      with the reference layout: the rule files to take the domains from
                   (default: the service's RUNTIME_* settings)
  --fix            give each of floodgate's keys without a TTL one (EXPIRE ... NX): two windows
                   of its rule, or --ttl for a policy key; keys of unknown shape are left alone
  --fix-reference  with --fix, give the reference's keys without a TTL one too (until one window
                   of the longest unit their window start fits after that window ends)
  --fix-unknown    with --fix, give keys of unknown shape --ttl too (with an empty prefix, rl:*
                   may hold other applications' keys: look at the report first)
  --ttl S          TTL for policy keys, and with --fix-unknown for keys of unknown shape (default 86400)
  --count N        SCAN COUNT per call, 1..1000 (default 100)
  --pause MS       pause between SCAN calls, 0..10000 ms (default 10)
  --max-calls N    stop after N SCAN calls per node (default 1000000)
`;

function connectOptions(): RedisOptions {
  // One attempt, no reconnect loop: a command-line tool should fail and say so.
  return { lazyConnect: true, enableOfflineQueue: true, maxRetriesPerRequest: 0, connectTimeout: 5000, retryStrategy: () => null };
}

type Topology = 'single' | 'cluster' | 'sentinel';

function sentinelClient(url: string): Redis {
  const [name, ...sentinels] = url.split(',');
  const addresses = sentinels.map((s) => /^\[?([^\]]+?)\]?:(\d+)$/.exec(s.trim()));
  if (!name || addresses.length === 0 || addresses.some((m) => m === null)) {
    throw new UsageError(`--redis ${redactUserInfo(url)}: with --sentinel, expected master,host:port[,host:port...]`);
  }
  const list = addresses.map((m) => ({ host: (m as RegExpExecArray)[1] as string, port: Number((m as RegExpExecArray)[2]) }));
  return new Redis({ ...connectOptions(), name, sentinels: list, sentinelRetryStrategy: () => null });
}

function clientFor(url: string, topology: Topology): Redis | Cluster {
  if (topology === 'sentinel') return sentinelClient(url);
  if (topology === 'cluster') {
    const m = /^(?:rediss?:\/\/)?(?:[^@/]*@)?\[?([^\]/]+?)\]?:(\d+)\/?$/.exec(url);
    if (!m) throw new UsageError(`--redis ${redactUserInfo(url)}: a cluster seed must be host:port`);
    return new Cluster([{ host: m[1], port: Number(m[2]) }], { lazyConnect: true, clusterRetryStrategy: () => null });
  }
  if (url.startsWith('/') || url.startsWith('./')) return new Redis({ ...connectOptions(), path: url });
  if (/^rediss?:\/\//.test(url)) return new Redis(url, connectOptions());
  const m = /^\[?([^\]]+?)\]?:(\d+)$/.exec(url);
  if (!m) throw new UsageError(`--redis ${redactUserInfo(url)}: expected redis://host:port, host:port or a socket path`);
  return new Redis({ ...connectOptions(), host: m[1], port: Number(m[2]) });
}

/** The Redis to scan and how to name it in messages (never with its password). */
interface Target {
  readonly client: Redis | Cluster;
  readonly label: string;
  /** Secrets a connection error might quote. */
  readonly secrets: readonly string[];
}

/** --redis and its topology, or else the service's own REDIS_URL and REDIS_TYPE (issue 19). */
function targetOf(parsed: ReturnType<typeof parseArgs>): Target {
  if (parsed.options.has('cluster') && parsed.options.has('sentinel')) throw new UsageError('--sentinel and --cluster exclude each other');
  const url = stringOption(parsed, 'redis');
  if (url !== undefined) {
    const topology: Topology = parsed.options.has('cluster') ? 'cluster' : parsed.options.has('sentinel') ? 'sentinel' : 'single';
    const userInfo = /^(?:rediss?:\/\/)?([^,]*)@[^@,]*$/.exec(url)?.[1];
    return { client: clientFor(url, topology), label: redactUserInfo(url), secrets: userInfo ? [userInfo] : [] };
  }
  if (parsed.options.has('cluster') || parsed.options.has('sentinel')) throw new UsageError('--cluster and --sentinel need --redis <url>');
  const redis = loadSettings().redis;
  if (redis === undefined) throw new UsageError('keys needs --redis <url> or REDIS_URL');
  const secrets = [redis.password, redis.sentinelPassword].filter((x): x is string => x !== undefined && x !== '');
  return { client: createRedisClient(redis, { once: true }), label: redis.url, secrets };
}

/** A message with every secret of the target replaced. */
function scrubbed(message: string, secrets: readonly string[]): string {
  return secrets.reduce((text, secret) => text.split(secret).join('***'), message);
}

// Control characters and the line and paragraph separators, and `\` itself so that an escape
// cannot be forged either.
// eslint-disable-next-line no-control-regex
const UNPRINTABLE = /[\\\u0000-\u001f\u007f-\u009f\u2028\u2029]/g;

/** A key name on one report line: a newline in it must not start a line of its own. */
export function printableKey(key: string): string {
  return key.replace(UNPRINTABLE, (c) => {
    if (c === '\\') return '\\\\';
    if (c === '\n') return '\\n';
    if (c === '\r') return '\\r';
    if (c === '\t') return '\\t';
    const code = c.charCodeAt(0);
    return code > 0xff ? `\\u${code.toString(16)}` : `\\x${code.toString(16).padStart(2, '0')}`;
  });
}

function formatReport(report: ScanReport, fix: boolean): string {
  let out = '';
  // SCAN's order is the hash table's: sorted, two runs can be compared line by line.
  for (const f of [...report.findings].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))) {
    const problems = [f.noTtl ? 'no-ttl' : '', f.unknownShape ? 'unknown-shape' : ''].filter(Boolean).join(',');
    const what = f.reference === true ? `${f.redisType}, reference key` : f.redisType;
    out += `${problems} ${printableKey(f.key)} (${what})` + (f.fixedTtlSeconds !== undefined ? ` -> ttl ${f.fixedTtlSeconds}s` : '') + '\n';
  }
  out +=
    `scanned ${report.scanned} key${report.scanned === 1 ? '' : 's'} on ${report.nodes} node${report.nodes === 1 ? '' : 's'}: ` +
    `${report.withoutTtl} without TTL, ${report.unknownShape} of unknown shape` +
    (fix ? `, ${report.fixed} fixed` : '') +
    '\n';
  return out;
}

/** --layout, else REDIS_KEY_LAYOUT as the service reads it. */
function layoutOf(parsed: ReturnType<typeof parseArgs>): KeyLayout {
  const layout = stringOption(parsed, 'layout');
  if (layout === undefined) return loadSettings().redisKeyLayout;
  if (layout !== 'floodgate' && layout !== 'reference') throw new UsageError(`--layout ${layout}: expected floodgate or reference`);
  return layout;
}

/**
 * The domains whose reference keys are judged: --domain, else those of the rules (--rules, else
 * the service's RUNTIME_* tree). Rules that cannot be loaded leave none: with the default empty
 * prefix, a guess would take other applications' keys for counters.
 */
async function referenceDomains(parsed: ReturnType<typeof parseArgs>, io: CliIo): Promise<ReferenceDomains> {
  const named = stringOption(parsed, 'domain');
  if (named !== undefined) {
    const list = named.split(',').filter((d) => d !== '');
    if (list.length === 0) throw new UsageError('--domain needs at least one domain');
    return new Map(list.map((d) => [d, []]));
  }
  try {
    const rules = await loadRulesLikeServer(stringOption(parsed, 'rules'));
    return referenceDomainsOf(rules.rulesByDomain);
  } catch (err) {
    io.err(
      `floodgate keys: no rules loaded (${(err as Error).message}); no key is taken for the reference's (name its domains with --domain)\n`,
    );
    return new Map();
  }
}

export async function keysCommand(args: readonly string[], io: CliIo): Promise<number> {
  const parsed = parseArgs(
    args,
    ['redis', 'prefix', 'layout', 'domain', 'rules', 'ttl', 'count', 'pause', 'max-calls'],
    ['cluster', 'sentinel', 'fix', 'fix-unknown', 'fix-reference'],
  );
  if (parsed.positional.length > 0) throw new UsageError(`unexpected argument ${parsed.positional[0]}`);
  const fix = parsed.options.has('fix');
  if (parsed.options.has('fix-unknown') && !fix) throw new UsageError('--fix-unknown needs --fix');
  if (parsed.options.has('fix-reference') && !fix) throw new UsageError('--fix-reference needs --fix');
  const reference = layoutOf(parsed) === 'reference';
  if (!reference && (parsed.options.has('domain') || parsed.options.has('rules')))
    throw new UsageError('--domain and --rules need the reference layout');
  const options = {
    prefix: stringOption(parsed, 'prefix') ?? loadSettings().cacheKeyPrefix,
    ...(reference ? { referenceDomains: await referenceDomains(parsed, io) } : {}),
    count: intOption(parsed, 'count', 100, 1, 1000),
    pauseMs: intOption(parsed, 'pause', 10, 0, 10_000),
    maxCalls: intOption(parsed, 'max-calls', 1_000_000, 1, 1_000_000_000),
    ...(fix
      ? {
          fix: {
            ttlSeconds: intOption(parsed, 'ttl', 86_400, 1, 10 * 365 * 86_400),
            unknownShapes: parsed.options.has('fix-unknown'),
            referenceKeys: parsed.options.has('fix-reference'),
          },
        }
      : {}),
  };
  const { client, label, secrets } = targetOf(parsed);
  // The connection's own error (ECONNREFUSED...) says more than the failed command's.
  let connectionError: Error | undefined;
  client.on('error', (err: Error) => (connectionError = err));
  try {
    await client.connect();
    const report = await scanCounterKeys(scanTargets(client, false), client, options);
    io.out(formatReport(report, fix));
    const left = report.withoutTtl - report.fixed + report.unknownShape;
    return left > 0 ? EXIT_FINDINGS : EXIT_OK;
  } catch (err) {
    io.err(`floodgate keys: redis ${label}: ${scrubbed((connectionError ?? (err as Error)).message, secrets)}\n`);
    return EXIT_USAGE;
  } finally {
    client.disconnect();
  }
}
