// Issue 19: what a newcomer met at start-up. A misspelt variable (REDIS_ULR) started the memory
// backend without a word, and the start banner was plain text under LOG_FORMAT=json.
import { afterEach, describe, expect, test } from 'vitest';
import { spawnServer, type ServerWithRules } from '../helpers/server-process';

let server: ServerWithRules | undefined;
afterEach(() => server?.cleanup());

describe('start-up output of the real process', () => {
  test('LOG_FORMAT=json: every stderr line is a JSON object, the banner and the doubts about the environment included', async () => {
    server = await spawnServer({}, { LOG_FORMAT: 'json', LOG_LEVEL: 'WARN', REDIS_ULR: '127.0.0.1:6379' });
    const lines = server.output().trim().split('\n');
    const parsed = lines.map((line) => JSON.parse(line) as { level: string; msg: string });
    expect(parsed.map((p) => p.msg)).toEqual(
      expect.arrayContaining([
        'REDIS_ULR is not a setting; did you mean REDIS_URL?',
        expect.stringMatching(/^no REDIS_URL is set, so the memory backend counts: each replica counts alone/),
        expect.stringMatching(/^floodgate: serving gRPC on /),
      ]),
    );
    expect(parsed.find((p) => p.msg.startsWith('REDIS_ULR'))?.level).toBe('warn');
  });

  test('an invalid environment names the likely typo before the error, and exits 2', async () => {
    await expect(spawnServer({}, { REDIS_URL: '127.0.0.1:1', REDIS_PERSECOND: 'true', REDIS_PERSECOND_ULR: '127.0.0.1:2' })).rejects.toThrow(
      /REDIS_PERSECOND_ULR is not a setting; did you mean REDIS_PERSECOND_URL\?[\s\S]*invalid value for REDIS_PERSECOND_URL/,
    );
  });
});
