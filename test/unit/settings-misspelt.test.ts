// Issue 19 finding 5: a misspelt variable silently changed the backend (REDIS_ULR=... started on
// the memory backend without a word, and each replica then counted alone).
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/base/log';
import { loadSettings } from '../../src/settings/settings';
import { reportSettingsDoubts } from '../../src/settings/doubts';

/** What start-up says of `env`: the settings when they load, the doubts in any case (as main does). */
function report(env: Record<string, string>): string[] {
  const lines: string[] = [];
  let settings;
  try {
    settings = loadSettings(env);
  } catch {
    settings = undefined;
  }
  reportSettingsDoubts(
    env,
    settings,
    createLogger('WARN', 'text', (l) => lines.push(l)),
  );
  return lines;
}

describe('start-up doubts about the environment', () => {
  it('names a variable that is close to a setting, and the setting it is close to', () => {
    const lines = report({ REDIS_ULR: '127.0.0.1:6379', LOG_LEVLE: 'debug', CACHE_KEY_PREFX: 'a_' });
    expect(lines.some((l) => l.includes('REDIS_ULR is not a setting; did you mean REDIS_URL?'))).toBe(true);
    expect(lines.some((l) => l.includes('LOG_LEVLE is not a setting; did you mean LOG_LEVEL?'))).toBe(true);
    expect(lines.some((l) => l.includes('CACHE_KEY_PREFX is not a setting; did you mean CACHE_KEY_PREFIX?'))).toBe(true);
  });

  it("knows floodgate's own settings and conditional ones, not only the reference's", () => {
    const lines = report({ BACKEND_FAILUR_MODE: 'allow', REDIS_URL: '127.0.0.1:1', REDIS_PERSECOND: 'true', REDIS_PERSECOND_ULR: 'x' });
    expect(lines.some((l) => l.includes('BACKEND_FAILUR_MODE is not a setting; did you mean BACKEND_FAILURE_MODE?'))).toBe(true);
    expect(lines.some((l) => l.includes('REDIS_PERSECOND_ULR is not a setting; did you mean REDIS_PERSECOND_URL?'))).toBe(true);
  });

  it('says nothing of settings spelt right, of the usual process variables, nor of unrelated names', () => {
    const env = {
      REDIS_URL: '127.0.0.1:6379',
      LOG_LEVEL: 'debug',
      HOME: '/root',
      PATH: '/usr/bin',
      HOSTNAME: 'floodgate-0',
      PWD: '/app',
      KUBERNETES_SERVICE_HOST: '10.0.0.1',
      REDIS_PORT: 'tcp://10.0.0.2:6379',
      REDIS_SERVICE_HOST: '10.0.0.2',
      NODE_ENV: 'production',
      // Envoy Gateway sets it; the reference reads no such variable (it is three edits from one).
      GRPC_SERVER_TLS_CA_CERT: '/certs/ca.crt',
    };
    expect(report(env)).toEqual([]);
  });

  it('says once, at WARN, that the memory backend counts per replica when no Redis is configured', () => {
    const lines = report({});
    expect(lines.filter((l) => l.includes('memory backend'))).toHaveLength(1);
    expect(lines.find((l) => l.includes('memory backend'))).toMatch(/level=warn .*no REDIS_URL.*per replica/);
    // Asked for explicitly: no doubt to report.
    expect(report({ BACKEND_TYPE: 'memory' })).toEqual([]);
  });

  it('says that REDIS_KEY_LAYOUT=reference does nothing without Redis (issue 30)', () => {
    const lines = report({ BACKEND_TYPE: 'memory', REDIS_KEY_LAYOUT: 'reference' });
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/level=warn .*REDIS_KEY_LAYOUT=reference.*memory backend/);
    expect(report({ REDIS_URL: '127.0.0.1:6379', REDIS_KEY_LAYOUT: 'reference' })).toEqual([]);
  });
});
