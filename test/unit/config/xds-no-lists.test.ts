// Issue 27, "not yet audited": `rate_limits` lists over xDS. README.md ("Several limits on one
// descriptor"): "xDS (RateLimitConfig) has no field for a list: rules from a management server
// stay one limit per descriptor." What a management server can put on the wire to try anyway
// compiles to one limit: the `rate_limit` field written twice (a message field: the later one
// is the limit), a field RateLimitConfig does not have (skipped, as protobuf-go skips it), and a
// descriptor key given twice (one descriptor each, refused as in a file). The served rules then
// answer one status from one counter.
import { describe, expect, it } from 'vitest';
import { compileSnapshot, RATE_LIMIT_CONFIG_TYPE_URL, type AnyResource } from '../../../src/config/xds/rate-limit-config-resource';
import { len, str, uint, type Bytes } from '../../helpers/protobuf-wire';

// ratelimit.config.ratelimit.v3 field numbers (proto/ratelimit/config/ratelimit/v3/rls_conf.proto).
const policy = (unit: number, requestsPerUnit: number, name: string): Bytes => [
  ...uint(1, BigInt(unit)),
  ...uint(2, BigInt(requestsPerUnit)),
  ...str(4, name),
];
const SECOND = 1;
const HOUR = 3;

function resource(...descriptors: Bytes[]): AnyResource {
  const config = [...str(1, 'x'), ...str(2, 'd'), ...descriptors.flatMap((body) => len(3, body))];
  return { type_url: RATE_LIMIT_CONFIG_TYPE_URL, value: Uint8Array.from(config) };
}

const match = (rules: ReturnType<typeof compileSnapshot>) => rules.match('d', [{ key: 'k', value: 'v' }]);

describe('a RateLimitConfig delivers one limit per descriptor, never a list', () => {
  it('rate_limit written twice: one limit, the later', () => {
    const rules = compileSnapshot([resource([...str(1, 'k'), ...len(3, policy(SECOND, 2, 'burst')), ...len(3, policy(HOUR, 3, 'hourly'))])], {
      mergeDomainConfig: false,
    });
    const m = match(rules);
    expect(m?.rules).toBeUndefined();
    expect(m?.rule).toMatchObject({ requestsPerUnit: 3, unit: 'HOUR', name: 'hourly' });
    expect(rules.rules).toHaveLength(1);
  });

  it('a field RateLimitDescriptor does not have (a would-be list, field 9) is skipped', () => {
    const wouldBeList = len(9, [...len(1, policy(SECOND, 2, 'burst')), ...len(1, policy(HOUR, 3, 'hourly'))]);
    const rules = compileSnapshot([resource([...str(1, 'k'), ...len(3, policy(SECOND, 2, 'burst')), ...wouldBeList])], {
      mergeDomainConfig: false,
    });
    expect(match(rules)?.rules).toBeUndefined();
    expect(match(rules)?.rule).toMatchObject({ requestsPerUnit: 2, unit: 'SECOND', name: 'burst' });
    expect(rules.rules).toHaveLength(1);
  });

  it('the same key in two descriptors is refused, as two such entries in a file are', () => {
    expect(() =>
      compileSnapshot(
        [resource([...str(1, 'k'), ...len(3, policy(SECOND, 2, 'burst'))], [...str(1, 'k'), ...len(3, policy(HOUR, 3, 'hourly'))])],
        {
          mergeDomainConfig: false,
        },
      ),
    ).toThrow(/duplicate descriptor composite key 'd\.k'/);
  });
});
