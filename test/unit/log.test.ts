import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/base/log';

function textLines(log: (l: ReturnType<typeof createLogger>) => void): string[] {
  const out: string[] = [];
  log(createLogger('DEBUG', 'text', (l) => out.push(l)));
  return out
    .join('')
    .split('\n')
    .filter((l) => l !== '');
}

describe('text log format (issue 8: msg is escaped)', () => {
  it('keeps a message with quotes and newlines on one line, readable back exactly', () => {
    const msg = 'redis: Reply Error: ERR "bad"\nlevel=error msg="forged"';
    const lines = textLines((l) => l.warn(msg));
    expect(lines).toHaveLength(1);
    const m = /^time="[^"]+" level=warn msg=("(?:[^"\\]|\\.)*")$/.exec(lines[0]!);
    expect(m).not.toBeNull();
    expect(JSON.parse(m![1]!)).toBe(msg);
  });

  it('quotes a field value that holds spaces, quotes or newlines; leaves plain ones bare', () => {
    const lines = textLines((l) => l.error('failed', { error: 'a "b"\nc', domains: 3, plain: 'x' }));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(`error=${JSON.stringify('a "b"\nc')}`);
    expect(lines[0]).toContain('domains=3');
    expect(lines[0]).toContain('plain=x');
  });

  it('prints a plain message as before', () => {
    expect(textLines((l) => l.info('rules reloaded'))[0]).toMatch(/ level=info msg="rules reloaded"$/);
  });
});
