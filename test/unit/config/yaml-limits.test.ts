import { describe, expect, it } from 'vitest';
import { parseRuleFile } from '../../../src/config/parse-rule-file';
import { goText, yamlTree } from '../../../src/config/yaml-tree';

/** A rule file whose descriptors all share one rate_limit through `count` aliases. */
function aliasedRules(count: number): string {
  let text = 'domain: d\ndescriptors:\n  - key: k0\n    rate_limit: &limit {unit: second, requests_per_unit: 1}\n';
  for (let i = 1; i <= count; i++) text += `  - key: k${i}\n    rate_limit: *limit\n`;
  return text;
}

function timed(f: () => void): number {
  const start = performance.now();
  try {
    f();
  } catch {
    // only the time matters here; the messages are pinned in rule-file-errors.test.ts
  }
  return performance.now() - start;
}

/**
 * The least of `rounds` timings of `f` and of `control`, interleaved: a file without aliases of
 * the same shape is the control, measured in the same run, so a busy machine slows both; a stall
 * only adds to a round.
 */
function leastTimes(f: () => void, control: () => void, rounds = 3): { ms: number; controlMs: number } {
  let ms = Infinity;
  let controlMs = Infinity;
  for (let r = 0; r < rounds; r++) {
    controlMs = Math.min(controlMs, timed(control));
    ms = Math.min(ms, timed(f));
  }
  return { ms, controlMs };
}

// 16,000 aliases in a 203 KiB file took 21.8 s to parse, synchronously, on the event loop.
describe('YAML alias bounds (issue 8, finding 11)', () => {
  it('rejects 16,000 aliases quickly, with the file name in the message', () => {
    let text = 'domain: d\nlimits:\n  - &limit {unit: second, requests_per_unit: 1}\n';
    for (let i = 0; i < 16_000; i++) text += '  - *limit\n';
    expect(() => parseRuleFile('aliases.yaml', text)).toThrow('aliases.yaml: error loading config file: yaml: more than 1000 aliases');
    // The same file with a plain scalar in place of each alias: as many nodes, as many bytes.
    const plain = text.replaceAll('*limit', 'limit0');
    const { ms, controlMs } = leastTimes(
      () => parseRuleFile('aliases.yaml', text),
      () => parseRuleFile('plain.yaml', plain),
    );
    console.log(
      `16,000 aliases (${(text.length / 1024).toFixed(0)} KiB): rejected in ${ms.toFixed(0)} ms; without aliases ${controlMs.toFixed(0)} ms`,
    );
    // Expanding them took 21.8 s; refusing them costs no more than reading the file.
    expect(ms).toBeLessThan(5 * controlMs + 50);
  });

  it('accepts 1000 aliases and resolves them in linear time', () => {
    const text = aliasedRules(1000);
    const config = parseRuleFile('aliases.yaml', text);
    expect(config.descriptors).toHaveLength(1001);
    expect(config.descriptors[1000]?.rateLimit?.requestsPerUnit).toBe(1);
    const plain = text.replaceAll('*limit', '{unit: second, requests_per_unit: 1}');
    const { ms, controlMs } = leastTimes(
      () => parseRuleFile('aliases.yaml', text),
      () => parseRuleFile('plain.yaml', plain),
    );
    console.log(
      `1000 aliases (${(text.length / 1024).toFixed(0)} KiB): parsed in ${ms.toFixed(0)} ms; without aliases ${controlMs.toFixed(0)} ms`,
    );
    expect(ms).toBeLessThan(5 * controlMs + 50);
  });

  it('resolves an alias to the latest anchor of that name before it', () => {
    const tree = yamlTree(['a: &x {b: &y 1}', 'c: &y 2', 'd: *x', 'e: *y'].join('\n'));
    const values = tree?.kind === 'map' ? tree.entries.map((e) => goText(e.value)) : [];
    expect(values).toEqual(['map[b:1]', '2', 'map[b:1]', '2']);
  });
});
