import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { SettingsError } from '../../src/base/errors';
import { loadSettings } from '../../src/settings/settings';

type Env = Record<string, string | undefined>;

/** The SettingsError that loading `env` throws (fails the test when nothing is thrown). */
function settingsErrorOf(env: Env): SettingsError {
  try {
    loadSettings(env);
  } catch (err) {
    expect(err).toBeInstanceOf(SettingsError);
    return err as SettingsError;
  }
  throw new Error(`loadSettings(${JSON.stringify(env)}) did not throw`);
}

describe('loadSettings defaults (empty environment)', () => {
  const s = loadSettings({});

  it('listens where the reference does', () => {
    expect(s.host).toBe('0.0.0.0');
    expect(s.port).toBe(8080);
    expect(s.grpcHost).toBe('0.0.0.0');
    expect(s.grpcPort).toBe(8081);
    expect(s.grpcUds).toBeUndefined();
    expect(s.grpcTls).toBeUndefined();
    expect(s.debugHost).toBe('127.0.0.1');
    expect(s.debugPort).toBe(6070);
  });

  it('serves Prometheus on :9090/metrics by default', () => {
    expect(s.usePrometheus).toBe(true);
    expect(s.prometheusHost).toBe('0.0.0.0');
    expect(s.prometheusPort).toBe(9090);
    expect(s.prometheusPath).toBe('/metrics');
  });

  it('logs at WARN in text', () => {
    expect(s.logLevel).toBe('WARN');
    expect(s.logFormat).toBe('text');
  });

  it('reads rules from /srv/runtime_data/current/config', () => {
    expect(s.runtimeRoot).toBe('/srv/runtime_data/current');
    expect(s.runtimeSubdirectory).toBe('');
    expect(s.runtimeAppDirectory).toBe('config');
    expect(s.rulesDir).toBe('/srv/runtime_data/current/config');
    expect(s.runtimeWatchRoot).toBe(true);
    expect(s.runtimeIgnoreDotFiles).toBe(false);
    expect(s.mergeDomainConfig).toBe(false);
    expect(s.maxRuleTreeBytes).toBe(1024 * 1024);
    expect(s.forceStartWithoutInitialConfig).toBe(false);
    expect(s.healthyWithAtLeastOneConfigLoaded).toBe(false);
  });

  it('uses the memory backend without REDIS_URL', () => {
    expect(s.backendType).toBe('memory');
    expect(s.redis).toBeUndefined();
    expect(s.redisPerSecond).toBeUndefined();
    expect(s.cacheKeyPrefix).toBe('');
    expect(s.backendFailureMode).toBe('error');
    expect(s.expirationJitterMaxSeconds).toBe(300);
    expect(s.localCacheSizeInBytes).toBe(0);
  });

  it('has the reference behaviour switches off and NEAR_LIMIT_RATIO 0.8', () => {
    expect(s.nearLimitRatio).toBe(0.8);
    expect(s.stopCacheKeyIncrementWhenOverlimit).toBe(false);
    expect(s.shadowMode).toBe(false);
    expect(s.quotaMode).toBe(false);
    expect(s.responseDynamicMetadata).toBe(false);
  });

  it('has the reference header names, headers off', () => {
    expect(s.limitResponseHeadersEnabled).toBe(false);
    expect(s.limitLimitHeader).toBe('RateLimit-Limit');
    expect(s.limitRemainingHeader).toBe('RateLimit-Remaining');
    expect(s.limitResetHeader).toBe('RateLimit-Reset');
  });

  it('has request size limits of a few KiB per value at most', () => {
    expect(s.requestLimits).toEqual({ maxDescriptors: 64, maxEntries: 32, maxKeyBytes: 256, maxValueBytes: 4096, maxCounters: 256 });
    expect(s.defaultDeadlineMs).toBe(1000);
    expect(s.shutdownGraceMs).toBe(10_000);
  });

  it('bounds what requests can make the service keep: counters (by their memory) and metric series', () => {
    // The memory backend's counters are bounded by bytes, 64 MiB, which fits the shipped 256 Mi
    // pod (issue 18, finding 15); a count bound only when MEMORY_MAX_COUNTERS is set.
    expect(s.memoryMaxBytes).toBe(64 * 1024 * 1024);
    expect(s.memoryMaxCounters).toBeUndefined();
    expect(s.metricsMaxSeries).toBe(1000);
  });

  it('treats an empty value like an unset one', () => {
    expect(loadSettings({ PORT: '', SHADOW_MODE: '', LOG_LEVEL: '' })).toMatchObject({ port: 8080, shadowMode: false, logLevel: 'WARN' });
  });
});

describe('loadSettings reads the variables', () => {
  it('takes ports, hosts and paths from the environment', () => {
    const s = loadSettings({
      HOST: '127.0.0.2',
      PORT: '18080',
      GRPC_HOST: '::',
      GRPC_PORT: '18081',
      GRPC_UDS: '/tmp/rls.sock',
      DEBUG_HOST: '0.0.0.0',
      DEBUG_PORT: '16070',
      USE_PROMETHEUS: 'false',
      PROMETHEUS_PATH: '/stats',
      LOG_LEVEL: 'debug',
      LOG_FORMAT: 'JSON',
    });
    expect(s).toMatchObject({
      host: '127.0.0.2',
      port: 18080,
      grpcHost: '::',
      grpcPort: 18081,
      grpcUds: '/tmp/rls.sock',
      debugHost: '0.0.0.0',
      debugPort: 16070,
      usePrometheus: false,
      prometheusPath: '/stats',
      logLevel: 'DEBUG',
      logFormat: 'json',
    });
  });

  it('joins RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY into rulesDir', () => {
    const s = loadSettings({ RUNTIME_ROOT: '/data', RUNTIME_SUBDIRECTORY: 'ratelimit', RUNTIME_APPDIRECTORY: 'rules' });
    expect(s.rulesDir).toBe(join('/data', 'ratelimit', 'rules'));
    expect(s.rulesDir).toBe('/data/ratelimit/rules');
    expect(loadSettings({ RUNTIME_ROOT: '/data', RUNTIME_SUBDIRECTORY: 'ratelimit' }).rulesDir).toBe('/data/ratelimit/config');
  });

  it('takes custom header names', () => {
    const s = loadSettings({
      LIMIT_RESPONSE_HEADERS_ENABLED: 'true',
      LIMIT_LIMIT_HEADER: 'X-RateLimit-Limit',
      LIMIT_REMAINING_HEADER: 'X-RateLimit-Remaining',
      LIMIT_RESET_HEADER: 'X-RateLimit-Reset',
    });
    expect(s.limitResponseHeadersEnabled).toBe(true);
    expect([s.limitLimitHeader, s.limitRemainingHeader, s.limitResetHeader]).toEqual([
      'X-RateLimit-Limit',
      'X-RateLimit-Remaining',
      'X-RateLimit-Reset',
    ]);
  });

  it('takes the numbers', () => {
    const s = loadSettings({
      NEAR_LIMIT_RATIO: '0.5',
      EXPIRATION_JITTER_MAX_SECONDS: '0',
      LOCAL_CACHE_SIZE_IN_BYTES: '1048576',
      BACKEND_FAILURE_MODE: 'local',
      MAX_DESCRIPTOR_VALUE_BYTES: '1024',
      MEMORY_MAX_COUNTERS: '5000',
      MEMORY_MAX_BYTES: '33554432',
      METRICS_MAX_SERIES: '200',
    });
    expect(s.memoryMaxCounters).toBe(5000);
    expect(s.memoryMaxBytes).toBe(33_554_432);
    expect(s.metricsMaxSeries).toBe(200);
    expect(s.nearLimitRatio).toBe(0.5);
    expect(s.expirationJitterMaxSeconds).toBe(0);
    expect(s.localCacheSizeInBytes).toBe(1048576);
    expect(s.backendFailureMode).toBe('local');
    expect(s.requestLimits.maxValueBytes).toBe(1024);
  });
});

describe('Go-style booleans (strconv.ParseBool)', () => {
  it.each(['1', 't', 'T', 'TRUE', 'true', 'True'])('%s is true', (v) => {
    expect(loadSettings({ SHADOW_MODE: v }).shadowMode).toBe(true);
    expect(loadSettings({ RUNTIME_IGNOREDOTFILES: v }).runtimeIgnoreDotFiles).toBe(true);
  });

  it.each(['0', 'f', 'F', 'FALSE', 'false', 'False'])('%s is false', (v) => {
    expect(loadSettings({ USE_PROMETHEUS: v }).usePrometheus).toBe(false);
    expect(loadSettings({ RUNTIME_WATCH_ROOT: v }).runtimeWatchRoot).toBe(false);
  });

  it.each(['yes', 'no', 'on', 'off', 'tRUE', 'y', '2', 'enabled'])('%s is rejected', (v) => {
    expect(settingsErrorOf({ QUOTA_MODE: v }).message).toBe(`invalid value for QUOTA_MODE: '${v}' (expected true or false)`);
  });
});

describe('a bad value stops start-up with one message naming the variable and the value', () => {
  it.each<[Env, string]>([
    [{ PORT: 'abc' }, `invalid value for PORT: 'abc' (expected an integer from 0 to 65535)`],
    [{ PORT: '65536' }, `invalid value for PORT: '65536' (expected an integer from 0 to 65535)`],
    [{ GRPC_PORT: '-1' }, `invalid value for GRPC_PORT: '-1' (expected an integer from 0 to 65535)`],
    [{ DEBUG_PORT: '60.5' }, `invalid value for DEBUG_PORT: '60.5' (expected an integer from 0 to 65535)`],
    [{ NEAR_LIMIT_RATIO: '1.5' }, `invalid value for NEAR_LIMIT_RATIO: '1.5' (expected a number from 0 to 1)`],
    [{ NEAR_LIMIT_RATIO: 'high' }, `invalid value for NEAR_LIMIT_RATIO: 'high' (expected a number from 0 to 1)`],
    [{ LOG_LEVEL: 'verbose' }, `invalid value for LOG_LEVEL: 'verbose' (expected one of DEBUG, INFO, WARN, ERROR)`],
    [{ LOG_FORMAT: 'xml' }, `invalid value for LOG_FORMAT: 'xml' (expected one of text, json)`],
    [{ BACKEND_TYPE: 'memcache' }, `invalid value for BACKEND_TYPE: 'memcache' (expected one of memory, redis)`],
    [{ BACKEND_FAILURE_MODE: 'open' }, `invalid value for BACKEND_FAILURE_MODE: 'open' (expected one of error, allow, deny, local)`],
    [{ EXPIRATION_JITTER_MAX_SECONDS: '1.5' }, `invalid value for EXPIRATION_JITTER_MAX_SECONDS: '1.5' (expected an integer from 0 to 86400)`],
    [{ LOCAL_CACHE_SIZE_IN_BYTES: '-1' }, `invalid value for LOCAL_CACHE_SIZE_IN_BYTES: '-1' (expected an integer from 0 to 1099511627776)`],
    [{ MEMORY_MAX_COUNTERS: '0' }, `invalid value for MEMORY_MAX_COUNTERS: '0' (expected an integer from 1 to 100000000)`],
    [{ MEMORY_MAX_COUNTERS: 'lots' }, `invalid value for MEMORY_MAX_COUNTERS: 'lots' (expected an integer from 1 to 100000000)`],
    [{ MEMORY_MAX_BYTES: '64Mi' }, `invalid value for MEMORY_MAX_BYTES: '64Mi' (expected an integer from 1048576 to 1099511627776)`],
    [{ MEMORY_MAX_BYTES: '1000' }, `invalid value for MEMORY_MAX_BYTES: '1000' (expected an integer from 1048576 to 1099511627776)`],
    [{ METRICS_MAX_SERIES: '-5' }, `invalid value for METRICS_MAX_SERIES: '-5' (expected an integer from 1 to 1000000)`],
    [{ PROMETHEUS_ADDR: '9090' }, `invalid value for PROMETHEUS_ADDR: '9090' (expected host:port or :port)`],
    [{ PROMETHEUS_PATH: 'metrics' }, `invalid value for PROMETHEUS_PATH: 'metrics' (must start with '/')`],
    [{ CACHE_KEY_PREFIX: 'rl{x}' }, `invalid value for CACHE_KEY_PREFIX: 'rl{x}' (must not contain '{' or '}')`],
    [{ LIMIT_REMAINING_HEADER: 'Rate Limit' }, `invalid value for LIMIT_REMAINING_HEADER: 'Rate Limit' (expected an HTTP header name)`],
    [{ REDIS_URL: 'r:6379', REDIS_TYPE: 'ring' }, `invalid value for REDIS_TYPE: 'ring' (expected one of SINGLE, SENTINEL, CLUSTER)`],
    [{ REDIS_URL: 'r:6379', REDIS_SOCKET_TYPE: 'udp' }, `invalid value for REDIS_SOCKET_TYPE: 'udp' (expected one of tcp, unix)`],
    [{ REDIS_URL: 'r:6379', REDIS_POOL_SIZE: '0' }, `invalid value for REDIS_POOL_SIZE: '0' (expected an integer from 1 to 1024)`],
    [{ REDIS_URL: 'r:6379', REDIS_TIMEOUT: '10' }, `invalid value for REDIS_TIMEOUT: '10' (expected a duration such as 500ms, 10s or 1m)`],
    [{ REDIS_URL: 'r:6379', REDIS_TLS: 'yes' }, `invalid value for REDIS_TLS: 'yes' (expected true or false)`],
    [{ GRPC_RLS_HANDLER: 'raw' }, `invalid value for GRPC_RLS_HANDLER: 'raw' (expected one of http2, grpc-js)`],
  ])('%j', (env, message) => {
    const err = settingsErrorOf(env);
    expect(err.message).toBe(message);
    expect(err.code).toBe('SETTINGS');
  });

  it('reports only the first bad variable, on one line', () => {
    const err = settingsErrorOf({ PORT: 'abc', GRPC_PORT: 'def', SHADOW_MODE: 'maybe' });
    expect(err.message).not.toContain('\n');
    expect(err.message.match(/invalid value for/g)).toHaveLength(1);
  });

  it('names the offending value as it was given (untrimmed)', () => {
    expect(settingsErrorOf({ DEBUG_PORT: ' 99999 ' }).message).toBe(
      `invalid value for DEBUG_PORT: ' 99999 ' (expected an integer from 0 to 65535)`,
    );
  });
});

describe('backend selection', () => {
  it('is redis when REDIS_URL is set, memory when BACKEND_TYPE says so', () => {
    expect(loadSettings({ REDIS_URL: 'localhost:6379' }).backendType).toBe('redis');
    const memory = loadSettings({ REDIS_URL: 'localhost:6379', BACKEND_TYPE: 'memory' });
    expect(memory.backendType).toBe('memory');
    expect(memory.redis).toBeUndefined();
  });

  it('requires REDIS_URL for BACKEND_TYPE=redis', () => {
    expect(settingsErrorOf({ BACKEND_TYPE: 'redis' }).message).toBe(`invalid value for REDIS_URL: '' (required when BACKEND_TYPE is redis)`);
  });

  it('fills the redis defaults', () => {
    const redis = loadSettings({ REDIS_URL: 'localhost:6379' }).redis;
    expect(redis).toEqual({
      type: 'SINGLE',
      url: 'localhost:6379',
      socketType: 'tcp',
      tls: false,
      tlsSkipHostnameVerification: false,
      poolSize: 10,
      timeoutMs: 10_000,
      pipelineWindowMs: 0,
      pipelineLimit: 0,
    });
  });
});

describe('REDIS_SOCKET_TYPE inference', () => {
  it.each<[Env, 'tcp' | 'unix']>([
    [{ REDIS_URL: 'localhost:6379' }, 'tcp'],
    [{ REDIS_URL: '10.0.0.1:6380' }, 'tcp'],
    [{ REDIS_URL: '/var/run/redis/redis.sock' }, 'unix'],
    [{ REDIS_URL: './redis.sock' }, 'unix'],
    [{ REDIS_URL: 'redis://10.0.0.1:6379' }, 'tcp'],
    [{ REDIS_URL: 'mymaster,10.0.0.1:26379,10.0.0.2:26379', REDIS_TYPE: 'SENTINEL' }, 'tcp'],
    [{ REDIS_URL: 'a:7000,b:7001', REDIS_TYPE: 'cluster' }, 'tcp'],
    [{ REDIS_URL: 'localhost:6379', REDIS_SOCKET_TYPE: 'unix' }, 'unix'],
    [{ REDIS_URL: '/var/run/redis.sock', REDIS_SOCKET_TYPE: 'TCP' }, 'tcp'],
  ])('%j → %s', (env, socketType) => {
    expect(loadSettings(env).redis?.socketType).toBe(socketType);
  });

  it('reads REDIS_TYPE case-insensitively', () => {
    expect(loadSettings({ REDIS_URL: 'a:7000', REDIS_TYPE: 'cluster' }).redis?.type).toBe('CLUSTER');
  });
});

describe('REDIS_AUTH', () => {
  it('is a password alone', () => {
    const redis = loadSettings({ REDIS_URL: 'r:6379', REDIS_AUTH: 's3cret' }).redis;
    expect(redis?.password).toBe('s3cret');
    expect(redis?.username).toBeUndefined();
  });

  it('is user:password, split at the first colon', () => {
    const redis = loadSettings({ REDIS_URL: 'r:6379', REDIS_AUTH: 'alice:pa:ss' }).redis;
    expect(redis?.username).toBe('alice');
    expect(redis?.password).toBe('pa:ss');
  });

  it('is absent when unset', () => {
    const redis = loadSettings({ REDIS_URL: 'r:6379' }).redis;
    expect(redis).not.toHaveProperty('password');
    expect(redis).not.toHaveProperty('username');
  });
});

describe('REDIS_TIMEOUT and REDIS_PIPELINE_WINDOW as Go durations', () => {
  it.each<[string, number]>([
    ['10s', 10_000],
    ['250ms', 250],
    ['1m30s', 90_000],
    ['1h', 3_600_000],
    ['1.5s', 1500],
    ['500us', 0.5],
    ['75µs', 0.075],
    ['2m0s500ms', 120_500],
    ['0', 0],
  ])('%s = %d ms', (v, ms) => {
    expect(loadSettings({ REDIS_URL: 'r:6379', REDIS_TIMEOUT: v }).redis?.timeoutMs).toBeCloseTo(ms, 9);
  });

  it.each(['10', 'abc', '10x', '1m30', '-5s', 's', '1 s', '1d', '.s', '10sec'])('rejects %j', (v) => {
    expect(settingsErrorOf({ REDIS_URL: 'r:6379', REDIS_TIMEOUT: v }).message).toBe(
      `invalid value for REDIS_TIMEOUT: '${v}' (expected a duration such as 500ms, 10s or 1m)`,
    );
  });

  it('reads the pipeline window the same way', () => {
    expect(loadSettings({ REDIS_URL: 'r:6379', REDIS_PIPELINE_WINDOW: '150us' }).redis?.pipelineWindowMs).toBeCloseTo(0.15, 9);
    expect(settingsErrorOf({ REDIS_URL: 'r:6379', REDIS_PIPELINE_WINDOW: '5' }).message).toContain(`REDIS_PIPELINE_WINDOW: '5'`);
  });
});

describe('CACHE_KEY_PREFIX', () => {
  it('is kept as given', () => {
    expect(loadSettings({ CACHE_KEY_PREFIX: 'ratelimit:' }).cacheKeyPrefix).toBe('ratelimit:');
  });

  it.each(['a{', '}b', '{tag}'])('rejects a brace in %j (it would become the cluster hash tag)', (v) => {
    expect(settingsErrorOf({ CACHE_KEY_PREFIX: v }).message).toBe(`invalid value for CACHE_KEY_PREFIX: '${v}' (must not contain '{' or '}')`);
  });
});

describe('REDIS_KEY_LAYOUT_CARRY_OVER (issue 30)', () => {
  it('is 15 minutes by default, a Go duration, 0 to turn it off', () => {
    expect(loadSettings({}).redisKeyLayoutCarryOverMs).toBe(15 * 60_000);
    expect(loadSettings({ REDIS_KEY_LAYOUT_CARRY_OVER: '2h' }).redisKeyLayoutCarryOverMs).toBe(7_200_000);
    expect(loadSettings({ REDIS_KEY_LAYOUT_CARRY_OVER: '0' }).redisKeyLayoutCarryOverMs).toBe(0);
    expect(settingsErrorOf({ REDIS_KEY_LAYOUT_CARRY_OVER: 'soon' }).message).toContain("invalid value for REDIS_KEY_LAYOUT_CARRY_OVER: 'soon'");
  });
});

describe('REDIS_KEY_LAYOUT_UNTIL (issue 30)', () => {
  it('an RFC 3339 time or epoch seconds, only with REDIS_KEY_LAYOUT=reference', () => {
    expect(loadSettings({}).redisKeyLayoutUntilMs).toBeUndefined();
    expect(loadSettings({ REDIS_KEY_LAYOUT: 'reference', REDIS_KEY_LAYOUT_UNTIL: '2026-12-01T03:00:00Z' }).redisKeyLayoutUntilMs).toBe(
      Date.UTC(2026, 11, 1, 3),
    );
    expect(loadSettings({ REDIS_KEY_LAYOUT: 'reference', REDIS_KEY_LAYOUT_UNTIL: '1796094000' }).redisKeyLayoutUntilMs).toBe(1_796_094_000_000);
    expect(settingsErrorOf({ REDIS_KEY_LAYOUT: 'reference', REDIS_KEY_LAYOUT_UNTIL: 'tomorrow' }).message).toContain(
      "invalid value for REDIS_KEY_LAYOUT_UNTIL: 'tomorrow'",
    );
    expect(settingsErrorOf({ REDIS_KEY_LAYOUT_UNTIL: '1796094000' }).message).toContain('needs REDIS_KEY_LAYOUT=reference');
  });

  it('is refused with REDIS_KEY_LAYOUT_CARRY_OVER=0: every window in progress at T would start afresh', () => {
    const env = { REDIS_KEY_LAYOUT: 'reference', REDIS_KEY_LAYOUT_UNTIL: '1796094000' };
    for (const off of ['0', '0s', '0m']) {
      expect(settingsErrorOf({ ...env, REDIS_KEY_LAYOUT_CARRY_OVER: off }).message).toBe(
        `invalid value for REDIS_KEY_LAYOUT_CARRY_OVER: '${off}' (REDIS_KEY_LAYOUT_UNTIL is set: leaving the shared layout without the carry-over would reset every window in progress at that moment; unset REDIS_KEY_LAYOUT_UNTIL, or let the carry-over on)`,
      );
    }
    expect(loadSettings({ ...env, REDIS_KEY_LAYOUT_CARRY_OVER: '1m' }).redisKeyLayoutCarryOverMs).toBe(60_000);
  });
});

describe('HOST, GRPC_HOST and DEBUG_HOST (issue 19, finding 3)', () => {
  it.each(['HOST', 'GRPC_HOST', 'DEBUG_HOST'])('%s takes IPv6 addresses without brackets', (name) => {
    const s = loadSettings({ [name]: '::1' });
    expect([s.host, s.grpcHost, s.debugHost]).toContain('::1');
  });

  // The reference refuses `[::]` too: "listen tcp: address [[::]]:8081: missing port in address".
  it.each(['HOST', 'GRPC_HOST', 'DEBUG_HOST'])("%s refuses '[::]', naming it", (name) => {
    expect(settingsErrorOf({ [name]: '[::]' }).message).toBe(
      `invalid value for ${name}: '[::]' (expected a host name or IP address without brackets, e.g. '::')`,
    );
  });
});

describe('PROMETHEUS_ADDR forms', () => {
  it.each<[string, string, number]>([
    [':9191', '0.0.0.0', 9191],
    ['127.0.0.1:9000', '127.0.0.1', 9000],
    ['localhost:9102', 'localhost', 9102],
    ['[::1]:9090', '::1', 9090],
    ['[::]:9090', '::', 9090],
  ])('%s → %s %d', (addr, host, port) => {
    const s = loadSettings({ PROMETHEUS_ADDR: addr });
    expect(s.prometheusHost).toBe(host);
    expect(s.prometheusPort).toBe(port);
  });

  it.each(['9090', 'localhost', 'localhost:', 'host:70000', ':port', 'host:123456'])('rejects %j', (v) => {
    expect(settingsErrorOf({ PROMETHEUS_ADDR: v }).message).toBe(`invalid value for PROMETHEUS_ADDR: '${v}' (expected host:port or :port)`);
  });
});

describe('REDIS_PERSECOND', () => {
  it('requires REDIS_PERSECOND_URL', () => {
    expect(settingsErrorOf({ REDIS_URL: 'r:6379', REDIS_PERSECOND: 'true' }).message).toBe(
      `invalid value for REDIS_PERSECOND_URL: '' (required when REDIS_PERSECOND is true)`,
    );
  });

  it('is off by default even when REDIS_PERSECOND_URL is set', () => {
    expect(loadSettings({ REDIS_URL: 'r:6379', REDIS_PERSECOND_URL: 'ps:6379' }).redisPerSecond).toBeUndefined();
  });

  it('reads its own variables', () => {
    const s = loadSettings({
      REDIS_URL: 'r:6379',
      REDIS_AUTH: 'main',
      REDIS_PERSECOND: '1',
      REDIS_PERSECOND_URL: '/run/ps.sock',
      REDIS_PERSECOND_AUTH: 'u:p',
      REDIS_PERSECOND_TYPE: 'SINGLE',
      REDIS_PERSECOND_POOL_SIZE: '3',
      REDIS_PERSECOND_TLS: 'true',
    });
    expect(s.redis).toMatchObject({ url: 'r:6379', socketType: 'tcp', password: 'main', poolSize: 10, tls: false });
    expect(s.redisPerSecond).toMatchObject({ url: '/run/ps.sock', socketType: 'unix', username: 'u', password: 'p', poolSize: 3, tls: true });
  });

  it('uses the REDIS_TLS_* files for the per-second Redis too, as the reference does', () => {
    const s = loadSettings({
      REDIS_URL: 'r:6379',
      REDIS_TLS: 'true',
      REDIS_TLS_CACERT: '/tls/ca.pem',
      REDIS_TLS_CLIENT_CERT: '/tls/cert.pem',
      REDIS_TLS_CLIENT_KEY: '/tls/key.pem',
      REDIS_PERSECOND: 'true',
      REDIS_PERSECOND_URL: 'ps:6379',
      REDIS_PERSECOND_TLS: 'true',
    });
    expect(s.redisPerSecond).toMatchObject({
      tls: true,
      tlsCaCert: '/tls/ca.pem',
      tlsClientCert: '/tls/cert.pem',
      tlsClientKey: '/tls/key.pem',
    });
  });
});

describe('Redis TLS files', () => {
  it('are read when set', () => {
    const redis = loadSettings({
      REDIS_URL: 'r:6379',
      REDIS_TLS: 'true',
      REDIS_TLS_CACERT: '/ca.pem',
      REDIS_TLS_CLIENT_CERT: '/c.pem',
      REDIS_TLS_CLIENT_KEY: '/k.pem',
      REDIS_TLS_SKIP_HOSTNAME_VERIFICATION: 'true',
    }).redis;
    expect(redis).toMatchObject({
      tls: true,
      tlsCaCert: '/ca.pem',
      tlsClientCert: '/c.pem',
      tlsClientKey: '/k.pem',
      tlsSkipHostnameVerification: true,
    });
  });

  it('need both the client cert and the key', () => {
    expect(settingsErrorOf({ REDIS_URL: 'r:6379', REDIS_TLS_CLIENT_CERT: '/c.pem' }).message).toBe(
      'invalid value for REDIS_TLS_CLIENT_CERT/REDIS_TLS_CLIENT_KEY: both or neither must be set',
    );
  });
});

describe('gRPC TLS', () => {
  const needBoth = 'invalid value for GRPC_SERVER_TLS_CERT/GRPC_SERVER_TLS_KEY: both are required when GRPC_SERVER_USE_TLS is true';

  it.each<Env>([
    { GRPC_SERVER_USE_TLS: 'true' },
    { GRPC_SERVER_USE_TLS: 'true', GRPC_SERVER_TLS_CERT: '/cert.pem' },
    { GRPC_SERVER_USE_TLS: 'true', GRPC_SERVER_TLS_KEY: '/key.pem' },
  ])('requires cert and key: %j', (env) => {
    expect(settingsErrorOf(env).message).toBe(needBoth);
  });

  it('is off unless GRPC_SERVER_USE_TLS, whatever files are named', () => {
    expect(loadSettings({ GRPC_SERVER_TLS_CERT: '/cert.pem', GRPC_SERVER_TLS_KEY: '/key.pem' }).grpcTls).toBeUndefined();
  });

  it('carries the files and the client CA / SAN for mTLS', () => {
    expect(loadSettings({ GRPC_SERVER_USE_TLS: 'true', GRPC_SERVER_TLS_CERT: '/cert.pem', GRPC_SERVER_TLS_KEY: '/key.pem' }).grpcTls).toEqual({
      cert: '/cert.pem',
      key: '/key.pem',
    });
    expect(
      loadSettings({
        GRPC_SERVER_USE_TLS: 'true',
        GRPC_SERVER_TLS_CERT: '/cert.pem',
        GRPC_SERVER_TLS_KEY: '/key.pem',
        GRPC_CLIENT_TLS_CACERT: '/ca.pem',
        GRPC_CLIENT_TLS_SAN: 'envoy.internal',
      }).grpcTls,
    ).toEqual({ cert: '/cert.pem', key: '/key.pem', clientCaCert: '/ca.pem', clientSan: 'envoy.internal' });
  });
});

describe('the result is frozen', () => {
  const s = loadSettings({
    REDIS_URL: 'r:6379',
    REDIS_PERSECOND: 'true',
    REDIS_PERSECOND_URL: 'ps:6379',
    GRPC_SERVER_USE_TLS: 'true',
    GRPC_SERVER_TLS_CERT: '/cert.pem',
    GRPC_SERVER_TLS_KEY: '/key.pem',
  });

  it('at the top and in every nested object', () => {
    expect(Object.isFrozen(s)).toBe(true);
    expect(Object.isFrozen(s.requestLimits)).toBe(true);
    expect(Object.isFrozen(s.redis)).toBe(true);
    expect(Object.isFrozen(s.redisPerSecond)).toBe(true);
    expect(Object.isFrozen(s.grpcTls)).toBe(true);
  });

  it('so assignments throw and change nothing', () => {
    expect(() => {
      (s as { port: number }).port = 1;
    }).toThrow(TypeError);
    expect(() => {
      (s.redis as { url: string }).url = 'evil:6379';
    }).toThrow(TypeError);
    expect(s.port).toBe(8080);
    expect(s.redis?.url).toBe('r:6379');
  });
});

describe('bounds against abusive clients (issue 8)', () => {
  it('have defaults that hold a slow or hostile client to little memory and time', () => {
    const s = loadSettings({});
    // Issue 18, finding 3: 100 streams a connection, 256 connections, 10 s to receive a
    // request, node's own 10 MiB per connection; finding 10: resets well under nghttp2's 1,000.
    expect(s.grpcLimits).toEqual({
      maxReceiveMessageBytes: 65536,
      maxConcurrentStreams: 100,
      maxConnectionIdleMs: 60_000,
      maxSessionMemoryMb: 10,
      connections: {
        maxConnections: 256,
        maxFirstCallMs: 10_000,
        maxUnfinishedRequestBytes: 8 * 1024 * 1024,
        maxRequestReceiveMs: 10_000,
        resetBurst: 100,
        resetsPerSecond: 20,
      },
    });
    // The bound: idle gRPC connections closed within 90 s.
    expect(s.grpcLimits.maxConnectionIdleMs).toBeLessThanOrEqual(90_000);
    expect(s.httpLimits).toEqual({
      requestTimeoutMs: 10_000,
      headersTimeoutMs: 5_000,
      maxBodyBytes: 65536,
      maxConnections: 1024,
      maxConnectionsPerPeer: 512,
    });
  });

  it('are read from the environment', () => {
    const s = loadSettings({
      GRPC_MAX_RECEIVE_MESSAGE_BYTES: '262144',
      GRPC_MAX_CONCURRENT_STREAMS: '50',
      GRPC_MAX_CONNECTION_IDLE: '90s',
      GRPC_MAX_SESSION_MEMORY: '32',
      GRPC_MAX_CONNECTIONS: '64',
      GRPC_MAX_REQUEST_RECEIVE_TIME: '2s',
      GRPC_MAX_RESET_BURST: '10',
      GRPC_MAX_RESETS_PER_SECOND: '5',
      GRPC_MAX_FIRST_CALL_TIME: '3s',
      GRPC_MAX_UNFINISHED_REQUEST_BYTES: '1048576',
      HTTP_REQUEST_TIMEOUT: '2s',
      HTTP_HEADERS_TIMEOUT: '500ms',
      HTTP_MAX_BODY_BYTES: '4096',
      HTTP_MAX_CONNECTIONS: '10',
      HTTP_MAX_CONNECTIONS_PER_PEER: '3',
    });
    expect(s.grpcLimits).toEqual({
      maxReceiveMessageBytes: 262144,
      maxConcurrentStreams: 50,
      maxConnectionIdleMs: 90_000,
      maxSessionMemoryMb: 32,
      connections: {
        maxConnections: 64,
        maxFirstCallMs: 3000,
        maxUnfinishedRequestBytes: 1048576,
        maxRequestReceiveMs: 2000,
        resetBurst: 10,
        resetsPerSecond: 5,
      },
    });
    expect(s.httpLimits).toEqual({
      requestTimeoutMs: 2000,
      headersTimeoutMs: 500,
      maxBodyBytes: 4096,
      maxConnections: 10,
      maxConnectionsPerPeer: 3,
    });
    expect(Object.isFrozen(s.grpcLimits)).toBe(true);
    expect(Object.isFrozen(s.httpLimits)).toBe(true);
  });

  it('a GRPC_MAX_RECEIVE_MESSAGE_BYTES above the default budget raises the budget left at its default (one such message fits twice)', () => {
    const s = loadSettings({ GRPC_MAX_RECEIVE_MESSAGE_BYTES: '16777216' });
    expect(s.grpcLimits.connections.maxUnfinishedRequestBytes).toBe(2 * (16777216 + 5));
    expect(loadSettings({}).grpcLimits.connections.maxUnfinishedRequestBytes).toBe(8 * 1024 * 1024);
  });

  it.each<[Env, string]>([
    [
      { GRPC_MAX_RECEIVE_MESSAGE_BYTES: '100' },
      `invalid value for GRPC_MAX_RECEIVE_MESSAGE_BYTES: '100' (expected an integer from 1024 to 16777216)`,
    ],
    [{ GRPC_MAX_CONCURRENT_STREAMS: '0' }, `invalid value for GRPC_MAX_CONCURRENT_STREAMS: '0' (expected an integer from 1 to 1000000)`],
    [
      { GRPC_MAX_UNFINISHED_REQUEST_BYTES: '65536' },
      `invalid value for GRPC_MAX_UNFINISHED_REQUEST_BYTES: '65536' (must be at least GRPC_MAX_RECEIVE_MESSAGE_BYTES + 5, 65541)`,
    ],
    [{ GRPC_MAX_FIRST_CALL_TIME: '0' }, `invalid value for GRPC_MAX_FIRST_CALL_TIME: '0' (expected a duration from 1ms to 1h)`],
    [{ GRPC_MAX_CONNECTION_IDLE: '0' }, `invalid value for GRPC_MAX_CONNECTION_IDLE: '0' (expected a duration from 1ms to 24h)`],
    [{ GRPC_MAX_CONNECTION_IDLE: 'soon' }, `invalid value for GRPC_MAX_CONNECTION_IDLE: 'soon' (expected a duration such as 500ms, 10s or 1m)`],
    [{ GRPC_MAX_CONNECTIONS: '0' }, `invalid value for GRPC_MAX_CONNECTIONS: '0' (expected an integer from 1 to 1000000)`],
    [{ GRPC_MAX_SESSION_MEMORY: '0' }, `invalid value for GRPC_MAX_SESSION_MEMORY: '0' (expected an integer from 1 to 4096)`],
    [{ GRPC_MAX_REQUEST_RECEIVE_TIME: '0' }, `invalid value for GRPC_MAX_REQUEST_RECEIVE_TIME: '0' (expected a duration from 1ms to 1h)`],
    [{ GRPC_MAX_RESET_BURST: '0' }, `invalid value for GRPC_MAX_RESET_BURST: '0' (expected an integer from 1 to 1000000)`],
    [{ GRPC_MAX_RESETS_PER_SECOND: 'x' }, `invalid value for GRPC_MAX_RESETS_PER_SECOND: 'x' (expected an integer from 1 to 1000000)`],
    [{ HTTP_REQUEST_TIMEOUT: '0' }, `invalid value for HTTP_REQUEST_TIMEOUT: '0' (expected a duration from 1ms to 1h)`],
    [{ HTTP_HEADERS_TIMEOUT: '20s' }, `invalid value for HTTP_HEADERS_TIMEOUT: '20s' (must not exceed HTTP_REQUEST_TIMEOUT, 10000 ms)`],
    [{ HTTP_MAX_BODY_BYTES: '1k' }, `invalid value for HTTP_MAX_BODY_BYTES: '1k' (expected an integer from 1024 to 16777216)`],
    [{ HTTP_MAX_CONNECTIONS: '-5' }, `invalid value for HTTP_MAX_CONNECTIONS: '-5' (expected an integer from 1 to 1000000)`],
  ])('a bad value stops start-up: %j', (env, message) => {
    expect(settingsErrorOf(env).message).toBe(message);
  });
});

describe('contradictory gRPC TLS settings stop start-up (issue 8)', () => {
  it.each<[Env, string]>([
    [{ GRPC_CLIENT_TLS_CACERT: '/ca.pem' }, 'GRPC_CLIENT_TLS_CACERT is set but GRPC_SERVER_USE_TLS is not true'],
    [{ GRPC_CLIENT_TLS_SAN: 'envoy' }, 'GRPC_CLIENT_TLS_SAN is set but GRPC_SERVER_USE_TLS is not true'],
    [
      { GRPC_SERVER_USE_TLS: 'false', GRPC_CLIENT_TLS_CACERT: '/ca.pem', GRPC_CLIENT_TLS_SAN: 'envoy' },
      'GRPC_CLIENT_TLS_CACERT is set but GRPC_SERVER_USE_TLS is not true',
    ],
    [
      { GRPC_SERVER_USE_TLS: 'true', GRPC_SERVER_TLS_CERT: '/c.pem', GRPC_SERVER_TLS_KEY: '/k.pem', GRPC_CLIENT_TLS_SAN: 'envoy' },
      'GRPC_CLIENT_TLS_SAN is set without GRPC_CLIENT_TLS_CACERT',
    ],
  ])('%j', (env, message) => {
    expect(settingsErrorOf(env).message).toContain(message);
  });
});

describe('user info in REDIS_URL (issue 8)', () => {
  it('is taken out of the address and used as the credentials', () => {
    const redis = loadSettings({ REDIS_URL: 'redis://:pw@127.0.0.1:6379' }).redis;
    expect(redis?.url).toBe('redis://127.0.0.1:6379');
    expect(redis?.password).toBe('pw');
    expect(redis?.username).toBeUndefined();
  });

  it('carries a user and a percent-encoded password', () => {
    const redis = loadSettings({ REDIS_URL: 'redis://alice:p%40ss:w@cache:6380' }).redis;
    expect(redis).toMatchObject({ url: 'redis://cache:6380', username: 'alice', password: 'p@ss:w' });
  });

  it('leaves a malformed address without its secret, so later messages cannot echo it', () => {
    const redis = loadSettings({ REDIS_URL: 'redis://u:hunter2@host:1@nohost' }).redis;
    expect(redis?.url).toBe('redis://nohost');
    expect(JSON.stringify({ ...redis, password: undefined })).not.toContain('hunter2');
  });

  it('leaves a socket path with an @ alone', () => {
    expect(loadSettings({ REDIS_URL: '/run/redis@6379.sock' }).redis).toMatchObject({ url: '/run/redis@6379.sock', socketType: 'unix' });
    expect(loadSettings({ REDIS_URL: '/run/redis@6379.sock' }).redis).not.toHaveProperty('password');
  });

  it('works for the per-second Redis too', () => {
    const s = loadSettings({ REDIS_URL: 'r:1', REDIS_PERSECOND: 'true', REDIS_PERSECOND_URL: 'bob:x@ps:2' });
    expect(s.redisPerSecond).toMatchObject({ url: 'ps:2', username: 'bob', password: 'x' });
  });

  it.each<Env>([
    { REDIS_URL: 'redis://:hunter2@127.0.0.1:6379', REDIS_AUTH: 'other' },
    { REDIS_URL: 'mymaster,:hunter2@127.0.0.1:26379', REDIS_TYPE: 'SENTINEL' },
    { REDIS_URL: 'a:1,u:hunter2@b:2', REDIS_TYPE: 'CLUSTER' },
    { REDIS_URL: 'redis://u:%E0%A4%Ahunter2@host:1' },
  ])('is refused without echoing the password: %j', (env) => {
    const err = settingsErrorOf(env);
    expect(err.message).toMatch(/REDIS_URL/);
    expect(err.message).not.toContain('hunter2');
  });
});

describe('REDIS_SENTINEL_AUTH (the reference name; issue 8)', () => {
  it("is the sentinels' own password, apart from REDIS_AUTH", () => {
    const redis = loadSettings({
      REDIS_TYPE: 'SENTINEL',
      REDIS_URL: 'm,s:26379',
      REDIS_AUTH: 'master-pw',
      REDIS_SENTINEL_AUTH: 'sentinel-pw',
    }).redis;
    expect(redis).toMatchObject({ password: 'master-pw', sentinelPassword: 'sentinel-pw' });
    expect(redis).not.toHaveProperty('sentinelUsername');
  });

  it('takes user:password', () => {
    const redis = loadSettings({ REDIS_TYPE: 'SENTINEL', REDIS_URL: 'm,s:26379', REDIS_SENTINEL_AUTH: 'watcher:pw' }).redis;
    expect(redis).toMatchObject({ sentinelUsername: 'watcher', sentinelPassword: 'pw' });
  });

  it('has a per-second twin, REDIS_PERSECOND_SENTINEL_AUTH', () => {
    const s = loadSettings({
      REDIS_URL: 'r:1',
      REDIS_SENTINEL_AUTH: 'main',
      REDIS_PERSECOND: 'true',
      REDIS_PERSECOND_TYPE: 'SENTINEL',
      REDIS_PERSECOND_URL: 'm,s:26379',
      REDIS_PERSECOND_SENTINEL_AUTH: 'ps',
    });
    expect(s.redis?.sentinelPassword).toBe('main');
    expect(s.redisPerSecond?.sentinelPassword).toBe('ps');
  });

  it('is absent when unset', () => {
    expect(loadSettings({ REDIS_TYPE: 'SENTINEL', REDIS_URL: 'm,s:26379', REDIS_AUTH: 'pw' }).redis).not.toHaveProperty('sentinelPassword');
  });
});

describe('stats sinks (USE_STATSD, USE_DOG_STATSD, DISABLE_STATS) as the reference reads them', () => {
  it('sends statsd by default, to localhost:8125 over TCP every 10 s, as the reference (gostats) does', () => {
    expect(loadSettings({}).statsd).toEqual({
      format: 'statsd',
      host: 'localhost',
      port: 8125,
      protocol: 'tcp',
      flushIntervalMs: 10_000,
      extraTags: [],
      mogrifiers: [],
    });
  });

  it('reads STATSD_HOST, STATSD_PORT, STATSD_PROTOCOL, STATS_FLUSH_INTERVAL and EXTRA_TAGS', () => {
    const s = loadSettings({
      STATSD_HOST: '10.1.2.3',
      STATSD_PORT: '9125',
      STATSD_PROTOCOL: 'udp',
      STATS_FLUSH_INTERVAL: '1500ms',
      EXTRA_TAGS: 'b:2,a:x.y',
    }).statsd;
    expect(s).toMatchObject({
      host: '10.1.2.3',
      port: 9125,
      protocol: 'udp',
      flushIntervalMs: 1500,
      extraTags: [
        ['a', 'x_y'],
        ['b', '2'],
      ],
    });
  });

  it('is off with USE_STATSD=false or DISABLE_STATS=true (DISABLE_STATS wins over USE_DOG_STATSD too)', () => {
    expect(loadSettings({ USE_STATSD: 'false' }).statsd).toBeUndefined();
    expect(loadSettings({ DISABLE_STATS: 'true' }).statsd).toBeUndefined();
    expect(loadSettings({ DISABLE_STATS: 'true', USE_DOG_STATSD: 'true' }).statsd).toBeUndefined();
  });

  it('DISABLE_STATS turns the Prometheus endpoint off too (the reference then has no stats at all)', () => {
    expect(loadSettings({ DISABLE_STATS: 'true', USE_PROMETHEUS: 'true' }).usePrometheus).toBe(false);
    expect(loadSettings({ USE_STATSD: 'false' }).usePrometheus).toBe(true);
  });

  it('USE_DOG_STATSD sends DogStatsD over UDP, whatever USE_STATSD says', () => {
    expect(loadSettings({ USE_DOG_STATSD: 'true', USE_STATSD: 'false' }).statsd).toMatchObject({ format: 'dogstatsd', protocol: 'udp' });
    expect(loadSettings({ USE_DOG_STATSD: 'true' }).statsd).toMatchObject({ format: 'dogstatsd' });
  });

  it('reads the mogrifiers named in USE_DOG_STATSD_MOGRIFIERS', () => {
    const s = loadSettings({
      USE_DOG_STATSD: 'true',
      USE_DOG_STATSD_MOGRIFIERS: 'DOMAIN',
      DOG_STATSD_MOGRIFIER_DOMAIN_PATTERN: '^some\\.original\\.metric\\.(.*)$',
      DOG_STATSD_MOGRIFIER_DOMAIN_NAME: 'some.original.metric',
      DOG_STATSD_MOGRIFIER_DOMAIN_TAGS: 'domain:$1',
    }).statsd;
    expect(s?.mogrifiers).toHaveLength(1);
    expect(s?.mogrifiers[0]).toMatchObject({ id: 'DOMAIN', name: 'some.original.metric', tags: [['domain', '$1']] });
    expect(s?.mogrifiers[0]?.pattern.source).toBe('^some\\.original\\.metric\\.(.*)$');
  });

  it.each([
    [{ STATSD_PORT: '70000' }, 'STATSD_PORT'],
    [{ STATSD_PROTOCOL: 'sctp' }, 'STATSD_PROTOCOL'],
    [{ STATS_FLUSH_INTERVAL: '0' }, 'STATS_FLUSH_INTERVAL'],
    [{ STATS_FLUSH_INTERVAL: 'soon' }, 'STATS_FLUSH_INTERVAL'],
    [{ USE_STATSD: 'yes' }, 'USE_STATSD'],
    [{ DISABLE_STATS: 'nope' }, 'DISABLE_STATS'],
    [{ EXTRA_TAGS: 'env=prod' }, 'EXTRA_TAGS'],
    [{ EXTRA_TAGS: 'a:b:c' }, 'EXTRA_TAGS'],
    [{ USE_DOG_STATSD: 'true', USE_DOG_STATSD_MOGRIFIERS: 'X' }, 'DOG_STATSD_MOGRIFIER_X_PATTERN'],
    [{ USE_DOG_STATSD: 'true', USE_DOG_STATSD_MOGRIFIERS: 'X', DOG_STATSD_MOGRIFIER_X_PATTERN: '(' }, 'DOG_STATSD_MOGRIFIER_X_PATTERN'],
    [{ USE_DOG_STATSD: 'true', USE_DOG_STATSD_MOGRIFIERS: 'X', DOG_STATSD_MOGRIFIER_X_PATTERN: 'a' }, 'DOG_STATSD_MOGRIFIER_X_NAME'],
    [
      {
        USE_DOG_STATSD: 'true',
        USE_DOG_STATSD_MOGRIFIERS: 'X',
        DOG_STATSD_MOGRIFIER_X_PATTERN: 'a',
        DOG_STATSD_MOGRIFIER_X_NAME: 'b',
        DOG_STATSD_MOGRIFIER_X_TAGS: 'k:',
      },
      'DOG_STATSD_MOGRIFIER_X_TAGS',
    ],
  ])('refuses %j naming %s', (env, name) => {
    expect(settingsErrorOf(env).message).toContain(`invalid value for ${name}`);
  });
});

describe('GRPC_MAX_CONNECTION_AGE, GRPC_MAX_CONNECTION_AGE_GRACE, PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS, REDIS_PERSECOND_TIMEOUT', () => {
  it('default to the reference: 24h and 1h, seconds', () => {
    const s = loadSettings({});
    expect(s.grpcMaxConnectionAgeMs).toBe(24 * 3_600_000);
    expect(s.grpcMaxConnectionAgeGraceMs).toBe(3_600_000);
    expect(s.prometheusResponseTimeAsMilliseconds).toBe(false);
  });

  it('are read as Go durations and a boolean', () => {
    const s = loadSettings({
      GRPC_MAX_CONNECTION_AGE: '5m',
      GRPC_MAX_CONNECTION_AGE_GRACE: '30s',
      PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS: 'true',
    });
    expect(s.grpcMaxConnectionAgeMs).toBe(300_000);
    expect(s.grpcMaxConnectionAgeGraceMs).toBe(30_000);
    expect(s.prometheusResponseTimeAsMilliseconds).toBe(true);
  });

  it('refuse an age of 0 or beyond what a timer can wait', () => {
    expect(settingsErrorOf({ GRPC_MAX_CONNECTION_AGE: '0' }).message).toContain('invalid value for GRPC_MAX_CONNECTION_AGE');
    expect(settingsErrorOf({ GRPC_MAX_CONNECTION_AGE_GRACE: '1000h' }).message).toContain('invalid value for GRPC_MAX_CONNECTION_AGE_GRACE');
  });

  it('gives the per-second Redis its own timeout, REDIS_PERSECOND_TIMEOUT (10s by default), as the reference does', () => {
    const base = { REDIS_URL: 'r:6379', REDIS_PERSECOND: 'true', REDIS_PERSECOND_URL: 'p:6379', REDIS_TIMEOUT: '2s' };
    expect(loadSettings(base).redis?.timeoutMs).toBe(2000);
    expect(loadSettings(base).redisPerSecond?.timeoutMs).toBe(10_000);
    expect(loadSettings({ ...base, REDIS_PERSECOND_TIMEOUT: '250ms' }).redisPerSecond?.timeoutMs).toBe(250);
  });
});

describe('PROMETHEUS_MAPPER_YAML and REDIS_STARTUP_MAX_ELAPSED_TIME', () => {
  it('take the mapping file with the stats flush interval and EXTRA_TAGS', () => {
    expect(loadSettings({}).prometheusMapper).toBeUndefined();
    expect(loadSettings({ PROMETHEUS_MAPPER_YAML: '/etc/m.yaml', STATS_FLUSH_INTERVAL: '2s', EXTRA_TAGS: 'a:b' }).prometheusMapper).toEqual({
      path: '/etc/m.yaml',
      flushIntervalMs: 2000,
      extraTags: [['a', 'b']],
    });
  });

  it('wait for Redis at start-up only when REDIS_STARTUP_MAX_ELAPSED_TIME is above 0', () => {
    expect(loadSettings({}).redisStartupMaxElapsedMs).toBe(0);
    expect(loadSettings({ REDIS_STARTUP_MAX_ELAPSED_TIME: '2m' }).redisStartupMaxElapsedMs).toBe(120_000);
    expect(settingsErrorOf({ REDIS_STARTUP_MAX_ELAPSED_TIME: 'long' }).message).toContain('invalid value for REDIS_STARTUP_MAX_ELAPSED_TIME');
  });

  it('REDIS_STARTUP_SERVE_ANYWAY: off by default, and only with a bound on the wait', () => {
    expect(loadSettings({}).redisStartupServeAnyway).toBe(false);
    expect(loadSettings({ REDIS_STARTUP_MAX_ELAPSED_TIME: '30s', REDIS_STARTUP_SERVE_ANYWAY: 'true' }).redisStartupServeAnyway).toBe(true);
    expect(settingsErrorOf({ REDIS_STARTUP_SERVE_ANYWAY: 'true' }).message).toContain(
      "invalid value for REDIS_STARTUP_SERVE_ANYWAY: 'true' (needs REDIS_STARTUP_MAX_ELAPSED_TIME above 0",
    );
  });
});

describe('LOG_LEVEL takes every level name the reference (logrus) takes', () => {
  it.each([
    ['trace', 'DEBUG'],
    ['debug', 'DEBUG'],
    ['info', 'INFO'],
    ['warning', 'WARN'],
    ['Warn', 'WARN'],
    ['error', 'ERROR'],
    ['fatal', 'ERROR'],
    ['panic', 'ERROR'],
  ])('%s is %s', (value, level) => {
    expect(loadSettings({ LOG_LEVEL: value }).logLevel).toBe(level);
  });
});

describe('CONFIG_TYPE and the xDS settings (issue 13)', () => {
  it('defaults: rules from files; the xDS settings keep the reference defaults', () => {
    const s = loadSettings({});
    expect(s.configType).toBe('FILE');
    expect(s.xds).toBeUndefined();
    const x = loadSettings({ CONFIG_TYPE: 'GRPC_XDS_SOTW' }).xds!;
    expect(x).toEqual({
      serverUrl: 'localhost:18000',
      nodeId: 'default',
      nodeMetadata: {},
      additionalHeaders: {},
      connectRetryIntervalMs: 3000,
      backoff: { initialMs: 10_000, maxMs: 60_000, factor: 0.5, jitter: true },
      maxReceiveMessageBytes: 0,
      maxResources: 10_000,
    });
    expect(Object.isFrozen(x)).toBe(true);
    expect(Object.isFrozen(x.backoff)).toBe(true);
  });

  it('reads every CONFIG_GRPC_XDS_* and XDS_CLIENT_* variable', () => {
    const x = loadSettings({
      CONFIG_TYPE: 'grpc_xds_sotw',
      CONFIG_GRPC_XDS_SERVER_URL: 'xds.internal:18001',
      CONFIG_GRPC_XDS_NODE_ID: 'rls-1',
      CONFIG_GRPC_XDS_NODE_METADATA: 'zone=a,broken,role=rls=x',
      CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS: 'X-Tenant:acme,authorization:Bearer a:b',
      CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL: '250ms',
      CONFIG_GRPC_XDS_SERVER_USE_TLS: 'true',
      CONFIG_GRPC_XDS_SERVER_TLS_CACERT: '/certs/ca.crt',
      CONFIG_GRPC_XDS_CLIENT_TLS_CERT: '/certs/client.crt',
      CONFIG_GRPC_XDS_CLIENT_TLS_KEY: '/certs/client.key',
      CONFIG_GRPC_XDS_SERVER_TLS_SAN: 'xds.internal',
      XDS_CLIENT_BACKOFF_INITIAL_INTERVAL: '1s',
      XDS_CLIENT_BACKOFF_MAX_INTERVAL: '30s',
      XDS_CLIENT_BACKOFF_RANDOM_FACTOR: '2',
      XDS_CLIENT_BACKOFF_JITTER: 'false',
      XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES: '8388608',
      XDS_MAX_RESOURCES: '500',
    });
    expect(x.configType).toBe('GRPC_XDS_SOTW');
    expect(x.xds).toEqual({
      serverUrl: 'xds.internal:18001',
      nodeId: 'rls-1',
      // As in the reference: an entry without '=' is skipped, the value keeps later '='.
      nodeMetadata: { zone: 'a', role: 'rls=x' },
      additionalHeaders: { 'x-tenant': 'acme', authorization: 'Bearer a:b' },
      connectRetryIntervalMs: 250,
      backoff: { initialMs: 1000, maxMs: 30_000, factor: 2, jitter: false },
      maxReceiveMessageBytes: 8388608,
      maxResources: 500,
      tls: { caCert: '/certs/ca.crt', clientCert: '/certs/client.crt', clientKey: '/certs/client.key', serverSan: 'xds.internal' },
    });
  });

  it('TLS files mean nothing without CONFIG_GRPC_XDS_SERVER_USE_TLS, as in the reference', () => {
    expect(loadSettings({ CONFIG_TYPE: 'GRPC_XDS_SOTW', CONFIG_GRPC_XDS_SERVER_TLS_CACERT: '/ca.crt' }).xds!.tls).toBeUndefined();
    expect(loadSettings({ CONFIG_TYPE: 'GRPC_XDS_SOTW', CONFIG_GRPC_XDS_SERVER_USE_TLS: 'true' }).xds!.tls).toEqual({});
  });

  it('bad values stop start-up, naming the variable (even with CONFIG_TYPE=FILE, as envconfig does)', () => {
    expect(settingsErrorOf({ CONFIG_TYPE: 'ADS' }).message).toBe("invalid value for CONFIG_TYPE: 'ADS' (expected one of FILE, GRPC_XDS_SOTW)");
    expect(settingsErrorOf({ XDS_CLIENT_BACKOFF_INITIAL_INTERVAL: 'soon' }).message).toMatch(
      /^invalid value for XDS_CLIENT_BACKOFF_INITIAL_INTERVAL: 'soon'/,
    );
    expect(settingsErrorOf({ CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL: '3' }).message).toMatch(
      /^invalid value for CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL: '3'/,
    );
    expect(settingsErrorOf({ XDS_CLIENT_BACKOFF_MAX_INTERVAL: '48h' }).message).toMatch(
      /^invalid value for XDS_CLIENT_BACKOFF_MAX_INTERVAL: '48h'/,
    );
    expect(settingsErrorOf({ XDS_CLIENT_BACKOFF_RANDOM_FACTOR: '-1' }).message).toMatch(
      /^invalid value for XDS_CLIENT_BACKOFF_RANDOM_FACTOR: '-1'/,
    );
    expect(settingsErrorOf({ XDS_CLIENT_BACKOFF_JITTER: 'maybe' }).message).toMatch(/^invalid value for XDS_CLIENT_BACKOFF_JITTER: 'maybe'/);
    expect(settingsErrorOf({ XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES: '4MB' }).message).toMatch(
      /^invalid value for XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES: '4MB'/,
    );
    expect(settingsErrorOf({ XDS_MAX_RESOURCES: '0' }).message).toMatch(/^invalid value for XDS_MAX_RESOURCES: '0'/);
    expect(loadSettings({ CONFIG_TYPE: 'GRPC_XDS_SOTW' }).xds!.maxResources).toBe(10_000);
    expect(settingsErrorOf({ CONFIG_GRPC_XDS_SERVER_USE_TLS: 'yes' }).message).toMatch(
      /^invalid value for CONFIG_GRPC_XDS_SERVER_USE_TLS: 'yes'/,
    );
  });

  it('additional headers must be name:value pairs a gRPC client can send as text', () => {
    for (const bad of ['novalue', 'x-a:1,', 'bad key:1', 'token-bin:abc', 'grpc-timeout:1S']) {
      expect(settingsErrorOf({ CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS: bad }).message).toMatch(
        /^invalid value for CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS: /,
      );
    }
  });

  it('a client certificate needs its key and the other way round', () => {
    const env = { CONFIG_TYPE: 'GRPC_XDS_SOTW', CONFIG_GRPC_XDS_SERVER_USE_TLS: 'true' };
    expect(settingsErrorOf({ ...env, CONFIG_GRPC_XDS_CLIENT_TLS_CERT: '/c.crt' }).message).toMatch(
      /CONFIG_GRPC_XDS_CLIENT_TLS_CERT\/CONFIG_GRPC_XDS_CLIENT_TLS_KEY: both or neither/,
    );
    expect(settingsErrorOf({ ...env, CONFIG_GRPC_XDS_CLIENT_TLS_KEY: '/c.key' }).message).toMatch(/both or neither/);
  });
});

describe('TRACING_* (issue 13)', () => {
  it('off by default: no tracing settings at all', () => {
    expect(loadSettings({}).tracing).toBeUndefined();
    expect(loadSettings({ TRACING_ENABLED: 'false', TRACING_SERVICE_NAME: 'x' }).tracing).toBeUndefined();
  });

  it('on: the reference defaults', () => {
    const t = loadSettings({ TRACING_ENABLED: 'true' }).tracing;
    expect(t).toEqual({ serviceName: 'RateLimit', serviceNamespace: '', serviceInstanceId: '', samplingRate: 1, exporterProtocol: 'http' });
    expect(Object.isFrozen(t)).toBe(true);
  });

  it('reads every TRACING_* variable', () => {
    expect(
      loadSettings({
        TRACING_ENABLED: 'True',
        TRACING_SERVICE_NAME: 'rls',
        TRACING_SERVICE_NAMESPACE: 'edge',
        TRACING_SERVICE_INSTANCE_ID: 'rls-0',
        TRACING_SAMPLING_RATE: '0.1',
        TRACING_EXPORTER_PROTOCOL: 'GRPC',
      }).tracing,
    ).toEqual({ serviceName: 'rls', serviceNamespace: 'edge', serviceInstanceId: 'rls-0', samplingRate: 0.1, exporterProtocol: 'grpc' });
  });

  it('any sampling rate is accepted as in the reference (>= 1 always, <= 0 never)', () => {
    expect(loadSettings({ TRACING_ENABLED: 'true', TRACING_SAMPLING_RATE: '5' }).tracing?.samplingRate).toBe(5);
    expect(loadSettings({ TRACING_ENABLED: 'true', TRACING_SAMPLING_RATE: '-1' }).tracing?.samplingRate).toBe(-1);
  });

  it('bad values stop start-up, naming the variable (even with tracing off, as envconfig does)', () => {
    expect(settingsErrorOf({ TRACING_ENABLED: 'on' }).message).toMatch(/^invalid value for TRACING_ENABLED: 'on'/);
    expect(settingsErrorOf({ TRACING_SAMPLING_RATE: 'half' }).message).toMatch(/^invalid value for TRACING_SAMPLING_RATE: 'half'/);
    expect(settingsErrorOf({ TRACING_EXPORTER_PROTOCOL: 'zipkin' }).message).toBe(
      "invalid value for TRACING_EXPORTER_PROTOCOL: 'zipkin' (expected one of http, grpc)",
    );
  });
});

describe('GRPC_RLS_HANDLER (issue 29)', () => {
  it('serves ShouldRateLimit on node:http2 or with grpc-js, as asked', () => {
    expect(loadSettings({ GRPC_RLS_HANDLER: 'http2' }).grpcRlsHandler).toBe('http2');
    expect(loadSettings({ GRPC_RLS_HANDLER: 'grpc-js' }).grpcRlsHandler).toBe('grpc-js');
    expect(['http2', 'grpc-js']).toContain(loadSettings({}).grpcRlsHandler);
  });
});
