import calculateSlot from 'cluster-key-slot';
import { describe, expect, it } from 'vitest';
import type { Algorithm } from '../../../src/domain/algorithm';
import { counterIdentity, counterKey, escapeKeyPart } from '../../../src/limiter/counter-key';
import type { LimitSpec } from '../../../src/domain/limit-spec';
import type { CounterId } from '../../../src/limiter/limiter';
import { crc16, hashTag, keySlot } from '../../harness/key-slot';
import { mulberry32 } from '../../helpers/seeded-random';

const ALGORITHMS: readonly Algorithm[] = ['fixed_window', 'sliding_window', 'token_bucket', 'gcra', 'sliding_log'];
const WINDOWS = [1, 60, 120, 3600, 86400];
const PREFIXES = ['', 'floodgate:', 'a_b-', 'x%y='];

interface Descriptor {
  counter: CounterId;
  spec: LimitSpec;
}

function spec(algorithm: Algorithm = 'fixed_window', windowSeconds = 60, limit = 10, burst = limit): LimitSpec {
  return { algorithm, windowSeconds, limit, burst };
}

function counter(domain: string, ...pairs: [string, string][]): CounterId {
  return { domain, entries: pairs.map(([key, value]) => ({ key, value })) };
}

/** Redis compares keys as bytes; ioredis sends strings as UTF-8. */
const bytesOf = (key: string): string => Buffer.from(key, 'utf8').toString('latin1');

// --- An inverse of the key format: if every key decodes back to its descriptor, no two
// --- descriptors can share a key. Plain comparisons here; `expect` per key would be slow.

const ESCAPED_PART = /^(?:[^%{}:=]|%25|%7B|%7D|%3A|%3D|%uD[89AB][0-9A-F]{2}|%uD[C-F][0-9A-F]{2})*$/u;

/** undefined when `part` holds a raw special character or an unknown escape. */
function unescapePart(part: string): string | undefined {
  if (!ESCAPED_PART.test(part)) return undefined;
  return part.replace(/%(25|7B|7D|3A|3D)|%u([0-9A-F]{4})/g, (_, hex: string | undefined, unit: string | undefined) =>
    String.fromCharCode(parseInt((hex ?? unit) as string, 16)),
  );
}

/** `<prefix>rl:{<domain>(:<key>=<value>)*}:<algorithm>:<window>` back to its parts. */
function decodeKey(prefix: string, key: string): string | undefined {
  if (!key.startsWith(prefix + 'rl:{')) return undefined;
  const rest = key.slice(prefix.length + 3);
  const close = rest.indexOf('}');
  if (close < 0 || rest[close + 1] !== ':') return undefined;
  const suffix = rest.slice(close + 2).split(':');
  if (suffix.length !== 2) return undefined;
  const [domainPart = '', ...entryParts] = rest.slice(1, close).split(':');
  const domain = unescapePart(domainPart);
  const entries: [string, string][] = [];
  for (const part of entryParts) {
    const kv = part.split('=');
    const k = unescapePart(kv[0] ?? '');
    const v = unescapePart(kv[1] ?? '');
    if (kv.length !== 2 || k === undefined || v === undefined) return undefined;
    entries.push([k, v]);
  }
  if (domain === undefined) return undefined;
  return JSON.stringify([domain, entries, suffix[0], Number(suffix[1])]);
}

/** The tag as the architecture defines it: the escaped domain and entries, nothing else. */
function expectedTag(c: CounterId): string {
  return escapeKeyPart(c.domain) + c.entries.map((e) => `:${escapeKeyPart(e.key)}=${escapeKeyPart(e.value)}`).join('');
}

/** Why the key of `d` breaks a rule of the format; undefined when it follows all of them. */
function structureProblem(prefix: string, d: Descriptor, key: string): string | undefined {
  if (key !== prefix + 'rl:' + counterIdentity(d.counter, d.spec)) return 'not prefix + rl: + identity';
  if (key.split('{').length !== 2 || key.split('}').length !== 2) return 'not exactly one { and one }';
  const open = key.indexOf('{');
  if (key.slice(open + 1, key.indexOf('}', open)) !== expectedTag(d.counter)) return 'tag is not the escaped domain+entries';
  if (decodeKey(prefix, key) !== identityOf(d)) return 'does not decode back to its descriptor';
  return undefined;
}

function checkStructure(prefix: string, d: Descriptor): string {
  const key = counterKey(prefix, d.counter, d.spec);
  expect(structureProblem(prefix, d, key), JSON.stringify(key)).toBeUndefined();
  return key;
}

// --- Seeded random descriptors from an alphabet that is mostly separators and escapes.

const TOKENS = [
  '{',
  '}',
  ':',
  '_',
  '%',
  '=',
  '%7B',
  '%25',
  '%3A',
  '3A',
  'a',
  'b',
  '_b',
  'é',
  'e\u0301',
  '😀',
  '\u0000',
  ' ',
  '"',
  '.',
  'rl',
  '}:',
  '{}',
];

function randomDescriptor(random: () => number): Descriptor {
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
  const text = (): string => Array.from({ length: Math.floor(random() * 4) }, () => pick(TOKENS)).join('');
  const entries = Array.from({ length: Math.floor(random() * 4) }, () => ({ key: text(), value: text() }));
  return { counter: { domain: text(), entries }, spec: spec(pick(ALGORITHMS), pick(WINDOWS)) };
}

function identityOf(d: Descriptor): string {
  const { domain, entries } = d.counter;
  return JSON.stringify([domain, entries.map((e) => [e.key, e.value]), d.spec.algorithm, d.spec.windowSeconds]);
}

describe('counterKey', () => {
  it('has the documented shape', () => {
    expect(counterKey('fg:', counter('edge', ['remote_address', '10.0.0.1']), spec('token_bucket', 3600))).toBe(
      'fg:rl:{edge:remote_address=10.0.0.1}:token_bucket:3600',
    );
  });

  it('is injective over 30 000 random descriptors full of special characters (as UTF-8 bytes too)', () => {
    const random = mulberry32(20240601);
    const owner = new Map<string, string>();
    const problems: string[] = [];
    for (let i = 0; i < 30_000; i++) {
      const d = randomDescriptor(random);
      const prefix = PREFIXES[i % PREFIXES.length]!;
      const key = counterKey(prefix, d.counter, d.spec);
      const problem = structureProblem(prefix, d, key);
      if (problem !== undefined) problems.push(`${problem}: ${JSON.stringify(key)}`);
      const id = prefix + '\u0001' + identityOf(d);
      const seen = owner.get(bytesOf(key));
      if (seen === undefined) owner.set(bytesOf(key), id);
      else if (seen !== id) problems.push(`${seen} and ${id} share ${JSON.stringify(key)}`);
    }
    expect(problems.slice(0, 5)).toEqual([]);
    const distinct = owner.size;
    // The alphabet is small on purpose: many near-collisions, yet plenty of distinct descriptors.
    expect(distinct).toBeGreaterThan(20_000);
  });

  const pairs: [string, CounterId, CounterId][] = [
    ['_ inside a key vs inside a value', counter('d', ['a_b', 'c']), counter('d', ['a', 'b_c'])],
    ['= inside a key vs inside a value', counter('d', ['a=b', 'c']), counter('d', ['a', 'b=c'])],
    ['one entry holding ":" vs two entries', counter('d', ['k', 'a:b=c']), counter('d', ['k', 'a'], ['b', 'c'])],
    ['":" in the domain vs an entry', counter('d:k=v'), counter('d', ['k', 'v'])],
    ['"}" breaking out of the tag', counter('d', ['k', 'x}:token_bucket:1']), counter('d', ['k', 'x'])],
    ['"{" opening a second tag', counter('d', ['k', '{x}']), counter('d', ['k', 'x'])],
    ['an escape sequence vs the character it stands for', counter('d', ['k', '%3A']), counter('d', ['k', ':'])],
    ['a double escape', counter('d', ['k', '%253A']), counter('d', ['k', '%3A'])],
    ['an empty entry vs no entry', counter('d', ['', '']), counter('d')],
    ['an empty value vs a missing one', counter('d', ['a', ''], ['b', '']), counter('d', ['a', 'b'])],
    ['an empty domain', counter('', ['d', '']), counter('d')],
    ['entry order', counter('d', ['a', '1'], ['b', '2']), counter('d', ['b', '2'], ['a', '1'])],
    ['composed vs decomposed unicode', counter('d', ['k', 'é']), counter('d', ['k', 'e\u0301'])],
    ['NUL bytes', counter('d', ['k', 'a\u0000b']), counter('d', ['k', 'a'], ['b', ''])],
  ];

  it.each(pairs)('keeps apart %s', (_name, a, b) => {
    for (const prefix of PREFIXES) {
      const ka = checkStructure(prefix, { counter: a, spec: spec() });
      const kb = checkStructure(prefix, { counter: b, spec: spec() });
      expect(bytesOf(ka)).not.toBe(bytesOf(kb));
    }
  });

  it('handles 10 kB values and keeps them inside the tag', () => {
    const long = '{}:=%_é😀'.repeat(1300);
    const a = counter('d', ['k', long]);
    const b = counter('d', ['k', long.slice(0, -1) + 'x']);
    const ka = checkStructure('p:', { counter: a, spec: spec() });
    const kb = checkStructure('p:', { counter: b, spec: spec() });
    expect(ka).not.toBe(kb);
    expect(long.length).toBeGreaterThan(10_000);
    expect(hashTag(ka)).toEqual(Buffer.from(expectedTag(a), 'utf8'));
  });

  it('keeps the key when the limit or burst changes, not when the algorithm or window does', () => {
    const random = mulberry32(7);
    for (let i = 0; i < 500; i++) {
      const { counter: c } = randomDescriptor(random);
      const base = counterKey('p:', c, spec('fixed_window', 60, 10, 10));
      expect(counterKey('p:', c, spec('fixed_window', 60, 99_999, 10))).toBe(base);
      expect(counterKey('p:', c, spec('fixed_window', 60, 10, 500))).toBe(base);
      const byAlgorithm = new Set(ALGORITHMS.map((a) => counterKey('p:', c, spec(a, 60))));
      expect(byAlgorithm.size).toBe(ALGORITHMS.length);
      const byWindow = new Set(WINDOWS.map((w) => counterKey('p:', c, spec('fixed_window', w))));
      expect(byWindow.size).toBe(WINDOWS.length);
    }
  });

  // Distinct JS strings can be the same bytes: ioredis writes strings as UTF-8, which turns every
  // lone surrogate into U+FFFD. JSON ("\ud800" via /json) and lenient protobuf decoding can hand
  // such values in, so counter-key.ts escapes them.
  it('keeps apart values that differ only in lone surrogates', () => {
    const ka = counterKey('', counter('d', ['k', '\uD800']), spec());
    const kb = counterKey('', counter('d', ['k', '\uDBFF']), spec());
    expect(ka).not.toBe(kb);
    expect(bytesOf(ka)).not.toBe(bytesOf(kb));
  });
});

describe('cluster slots of counter keys', () => {
  it('computes CRC16/XMODEM and key slots like Redis', () => {
    expect(crc16('123456789')).toBe(0x31c3);
    expect(keySlot('foo')).toBe(12182);
    expect(keySlot('{user1000}.following')).toBe(keySlot('{user1000}.followers'));
    expect(keySlot('{}foo')).toBe(crc16('{}foo') % 16384);
    expect(keySlot('foo{}{bar}')).toBe(crc16('foo{}{bar}') % 16384);
    expect(keySlot('foo{{bar}}zap')).toBe(crc16('{bar') % 16384);
    const random = mulberry32(99);
    for (let i = 0; i < 2000; i++) {
      const key = counterKey('fg:', randomDescriptor(random).counter, spec());
      expect(keySlot(key)).toBe(calculateSlot(key));
    }
  });

  it('puts every key of one identity in one slot, whatever the algorithm or window', () => {
    const c = counter('edge', ['tenant', 'acme'], ['path', '/a:b{c}']);
    const slots = new Set(ALGORITHMS.flatMap((a) => WINDOWS.map((w) => keySlot(counterKey('fg:', c, spec(a, w))))));
    expect(slots.size).toBe(1);
  });

  it('spreads different descriptors over the slots', () => {
    const slots = Array.from({ length: 4096 }, (_, i) =>
      keySlot(counterKey('fg:', counter('edge', ['remote_address', `10.0.${i >> 8}.${i & 255}`]), spec())),
    );
    expect(new Set(slots).size).toBeGreaterThan(3000);
    // 16 ranges of 1024 slots each get 256 keys on average; none is starved or flooded.
    const perRange = new Array<number>(16).fill(0);
    for (const s of slots) perRange[s >> 10]!++;
    for (const n of perRange) {
      expect(n).toBeGreaterThan(128);
      expect(n).toBeLessThan(384);
    }
    // Three masters with the ranges redis-cli assigns (0-5460, 5461-10922, 10923-16383).
    const perMaster = [0, 0, 0];
    for (const s of slots) perMaster[s <= 5460 ? 0 : s <= 10922 ? 1 : 2]!++;
    for (const n of perMaster) expect(n).toBeGreaterThan(4096 / 3 - 200);
  });
});
