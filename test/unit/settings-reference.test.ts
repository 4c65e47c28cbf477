import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/base/log';
import { loadSettings } from '../../src/settings/settings';
import { REFERENCE_VARIABLES, reportIneffectiveVariables } from '../../src/settings/reference';

/** Every variable loadSettings reads from `env`. */
function readsOf(env: Record<string, string>): Set<string> {
  const reads = new Set<string>();
  loadSettings(
    new Proxy(env, {
      get(target, prop, receiver) {
        if (typeof prop === 'string') reads.add(prop);
        return Reflect.get(target, prop, receiver) as unknown;
      },
    }),
  );
  return reads;
}

// Every branch of loadSettings taken: redis with a per-second Redis, gRPC TLS, DogStatsD with a
// mogrifier, xDS over TLS.
const EVERY_BRANCH = {
  CONFIG_GRPC_XDS_SERVER_USE_TLS: 'true',
  REDIS_URL: '127.0.0.1:6379',
  REDIS_PERSECOND: 'true',
  REDIS_PERSECOND_URL: '127.0.0.1:6380',
  GRPC_SERVER_USE_TLS: 'true',
  GRPC_SERVER_TLS_CERT: '/c.pem',
  GRPC_SERVER_TLS_KEY: '/k.pem',
  USE_DOG_STATSD: 'true',
  USE_DOG_STATSD_MOGRIFIERS: 'M',
  DOG_STATSD_MOGRIFIER_M_PATTERN: 'x',
  DOG_STATSD_MOGRIFIER_M_NAME: 'y',
};

describe('the list of the reference variables (src/settings/reference.ts)', () => {
  const byName = new Map(REFERENCE_VARIABLES.map((v) => [v.name, v]));

  it("has every one of the reference's 114 variables once", () => {
    expect(REFERENCE_VARIABLES).toHaveLength(114);
    expect(byName.size).toBe(114);
  });

  it('gives a reason for every variable that is not simply supported', () => {
    for (const v of REFERENCE_VARIABLES) {
      if (v.status === 'supported') expect(v.why, v.name).toBeUndefined();
      else expect(v.why?.length, v.name).toBeGreaterThan(10);
    }
  });

  it('agrees with what loadSettings reads: every supported or accepted variable is read, no unsupported one is', () => {
    const reads = readsOf(EVERY_BRANCH);
    for (const v of REFERENCE_VARIABLES) {
      const read = v.status === 'supported' || v.status === 'accepted';
      expect(reads.has(v.name), `${v.name} is marked ${v.status} but loadSettings ${read ? 'never reads it' : 'reads it'}`).toBe(read);
    }
  });

  it('checks the accepted variables with the reference types', () => {
    expect(() => loadSettings({ REDIS_STARTUP_MAX_ELAPSED_TIME: 'forever' })).toThrow('invalid value for REDIS_STARTUP_MAX_ELAPSED_TIME');
    expect(() => loadSettings({ REDIS_HEALTH_CHECK_ACTIVE_CONNECTION: 'yes' })).toThrow(
      'invalid value for REDIS_HEALTH_CHECK_ACTIVE_CONNECTION',
    );
    expect(() => loadSettings({ REDIS_CLUSTER_PIPELINE_PARALLELISM: '-1' })).toThrow('invalid value for REDIS_CLUSTER_PIPELINE_PARALLELISM');
    expect(() => loadSettings({ REDIS_POOL_ON_EMPTY_BEHAVIOR: 'SPIN' })).toThrow('invalid value for REDIS_POOL_ON_EMPTY_BEHAVIOR');
    expect(loadSettings({ REDIS_STARTUP_MAX_ELAPSED_TIME: '1m', REDIS_POOL_ON_EMPTY_BEHAVIOR: 'wait' }).backendType).toBe('memory');
  });
});

describe('the start-up report of reference variables without effect', () => {
  function report(env: Record<string, string>): string[] {
    const lines: string[] = [];
    reportIneffectiveVariables(
      env,
      createLogger('WARN', 'text', (l) => lines.push(l)),
    );
    return lines;
  }

  it('logs one line per set variable that has no effect, and none for supported or unset ones', () => {
    const lines = report({
      HOST: '0.0.0.0',
      USE_STATSD: 'true',
      REDIS_POOL_ON_EMPTY_BEHAVIOR: 'WAIT',
      MEMCACHE_HOST_PORT: 'm:11211',
      TRACING_ENABLED: 'true',
      REDIS_POOL_SIZE: '',
    });
    expect(lines).toHaveLength(2);
    expect(lines[0]).toContain('REDIS_POOL_ON_EMPTY_BEHAVIOR is set but has no effect: a Go connection-pool setting');
    expect(lines[1]).toContain('MEMCACHE_HOST_PORT is set but not supported: the memcache backend is not offered');
  });

  it('is silent for CONFIG_TYPE and tracing: rule files, xDS and tracing are all supported', () => {
    expect(report({ CONFIG_TYPE: 'FILE' })).toEqual([]);
    expect(report({ CONFIG_TYPE: 'GRPC_XDS_SOTW', TRACING_ENABLED: 'true' })).toEqual([]);
  });

  it('is silent for an environment of supported variables only', () => {
    expect(report({ REDIS_URL: 'r:6379', USE_STATSD: 'false', GRPC_MAX_CONNECTION_AGE: '1h', SHADOW_MODE: 'true' })).toEqual([]);
  });
});
