import { describe, expect, it } from 'vitest';
import { hostOfHeader, isAllowedHost } from '../../../src/http/host-check';

describe('hostOfHeader', () => {
  it.each<[string | undefined, string | undefined]>([
    ['localhost', 'localhost'],
    ['LocalHost:6070', 'localhost'],
    ['[::1]:6070', '::1'],
    ['[::1]', '::1'],
    ['127.0.0.1:80', '127.0.0.1'],
    ['a:b', undefined],
    ['[::1', undefined],
    ['[::1]x', undefined],
    ['', undefined],
    [undefined, undefined],
  ])('%j → %j', (header, host) => {
    expect(hostOfHeader(header)).toBe(host);
  });
});

describe('isAllowedHost (issue 18, finding 14)', () => {
  it.each<[string | undefined, string, boolean]>([
    ['localhost:6070', '127.0.0.1', true],
    ['127.9.9.9', '127.0.0.1', true],
    ['[::1]:6070', '127.0.0.1', true],
    ['debug.internal:6070', 'debug.internal', true],
    ['10.0.0.5:6070', '10.0.0.5', true],
    ['10.0.0.5:6070', '127.0.0.1', false],
    ['attacker.example', '127.0.0.1', false],
    ['localhost.attacker.example', '127.0.0.1', false],
    [undefined, '127.0.0.1', false],
  ])('%j with DEBUG_HOST %j → %s', (header, debugHost, allowed) => {
    expect(isAllowedHost(header, debugHost)).toBe(allowed);
  });
});
