// The operator settings block: orphan-key scan and response header style.
import { describe, expect, it } from 'vitest';
import { SettingsError } from '../../src/base/errors';
import { loadSettings } from '../../src/settings/settings';

function errorOf(env: Record<string, string>): string {
  try {
    loadSettings(env);
  } catch (err) {
    expect(err).toBeInstanceOf(SettingsError);
    return (err as Error).message;
  }
  throw new Error('no error');
}

describe('operator settings', () => {
  it('defaults: no orphan scan, reference headers', () => {
    const s = loadSettings({});
    expect(s.orphanScan).toBeUndefined();
    expect(s.responseHeadersStyle).toBe('reference');
  });

  it('ORPHAN_SCAN_* read together, only with a Redis backend', () => {
    const s = loadSettings({
      REDIS_URL: '127.0.0.1:6379',
      ORPHAN_SCAN_INTERVAL: '5m',
      ORPHAN_SCAN_COUNT: '50',
      ORPHAN_SCAN_PAUSE: '20ms',
      ORPHAN_SCAN_REPLICAS: 'true',
    });
    expect(s.orphanScan).toEqual({ intervalMs: 300_000, count: 50, pauseMs: 20, replicas: true });
    expect(loadSettings({ REDIS_URL: '127.0.0.1:6379', ORPHAN_SCAN_INTERVAL: '1h' }).orphanScan).toEqual({
      intervalMs: 3_600_000,
      count: 100,
      pauseMs: 10,
      replicas: false,
    });
    expect(loadSettings({ REDIS_URL: '127.0.0.1:6379', ORPHAN_SCAN_INTERVAL: '0' }).orphanScan).toBeUndefined();
    expect(errorOf({ ORPHAN_SCAN_INTERVAL: '1m' })).toBe(
      "invalid value for ORPHAN_SCAN_INTERVAL: '1m' (the orphan scan needs BACKEND_TYPE=redis)",
    );
  });

  it('bad orphan scan values name the variable', () => {
    const base = { REDIS_URL: '127.0.0.1:6379', ORPHAN_SCAN_INTERVAL: '1m' };
    expect(errorOf({ ...base, ORPHAN_SCAN_INTERVAL: 'often' })).toBe(
      "invalid value for ORPHAN_SCAN_INTERVAL: 'often' (expected a duration such as 500ms, 10s or 1m)",
    );
    expect(errorOf({ ...base, ORPHAN_SCAN_INTERVAL: '100ms' })).toBe(
      "invalid value for ORPHAN_SCAN_INTERVAL: '100ms' (expected 0 (off) or at least 1s)",
    );
    expect(errorOf({ ...base, ORPHAN_SCAN_COUNT: '5000' })).toBe(
      "invalid value for ORPHAN_SCAN_COUNT: '5000' (expected an integer from 1 to 1000)",
    );
    expect(errorOf({ ...base, ORPHAN_SCAN_PAUSE: '2m' })).toBe("invalid value for ORPHAN_SCAN_PAUSE: '2m' (expected at most 10s)");
    expect(errorOf({ ...base, ORPHAN_SCAN_REPLICAS: 'maybe' })).toBe("invalid value for ORPHAN_SCAN_REPLICAS: 'maybe' (expected true or false)");
  });

  it('RESPONSE_HEADERS_STYLE', () => {
    expect(loadSettings({ RESPONSE_HEADERS_STYLE: 'ietf' }).responseHeadersStyle).toBe('ietf');
    expect(loadSettings({ RESPONSE_HEADERS_STYLE: 'X-RateLimit' }).responseHeadersStyle).toBe('x-ratelimit');
    expect(errorOf({ RESPONSE_HEADERS_STYLE: 'draft' })).toBe(
      "invalid value for RESPONSE_HEADERS_STYLE: 'draft' (expected one of reference, ietf, x-ratelimit)",
    );
  });
});
