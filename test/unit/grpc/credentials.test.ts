import { describe, expect, it } from 'vitest';
import { carriesSan, subjectAltNames } from '../../../src/grpc/credentials';

// Node prints a certificate's SANs as `DNS:a, IP Address:10.0.0.1, URI:spiffe://x, email:e@x`,
// quoting (JSON) any value that holds a comma, a quote or a control character.
describe('subjectAltNames', () => {
  it('reads each type and value', () => {
    expect(subjectAltNames('DNS:envoy.gateway, URI:spiffe://cluster/envoy, IP Address:10.0.0.1, email:a@b')).toEqual([
      { type: 'DNS', value: 'envoy.gateway' },
      { type: 'URI', value: 'spiffe://cluster/envoy' },
      { type: 'IP Address', value: '10.0.0.1' },
      { type: 'email', value: 'a@b' },
    ]);
  });

  it('unquotes a quoted value, so a comma inside it cannot fake another entry', () => {
    expect(subjectAltNames('email:"x, URI:spiffe://cluster/envoy", DNS:a')).toEqual([
      { type: 'email', value: 'x, URI:spiffe://cluster/envoy' },
      { type: 'DNS', value: 'a' },
    ]);
  });

  it('reads nothing from malformed text (fails closed)', () => {
    expect(subjectAltNames('email:"unterminated, URI:spiffe://cluster/envoy')).toEqual([]);
    expect(subjectAltNames('')).toEqual([]);
  });
});

describe('carriesSan: type and value must both match (issue 8, finding 12)', () => {
  const san = 'spiffe://cluster/envoy';
  it.each<[string, boolean]>([
    ['URI:spiffe://cluster/envoy', true],
    ['DNS:envoy.gateway, URI:spiffe://cluster/envoy', true],
    ['DNS:spiffe://cluster/envoy', true],
    ['email:spiffe://cluster/envoy', false],
    ['IP Address:spiffe://cluster/envoy', false],
    ['DirName:spiffe://cluster/envoy', false],
    ['othername:spiffe://cluster/envoy', false],
    ['email:"x, URI:spiffe://cluster/envoy"', false],
    ['URI:spiffe://cluster/envoy/extra', false],
    ['URI:SPIFFE://cluster/envoy', false],
  ])('%s → %s', (names, expected) => {
    expect(carriesSan(names, san)).toBe(expected);
  });

  it('an IP address setting never matches an IP SAN (the reference matches DNS names)', () => {
    expect(carriesSan('IP Address:10.0.0.1', '10.0.0.1')).toBe(false);
  });

  it('a certificate without SANs never matches', () => {
    expect(carriesSan(undefined, san)).toBe(false);
  });
});
