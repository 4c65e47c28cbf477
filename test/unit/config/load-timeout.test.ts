// Issue 26 review, finding 1: the watcher's load timeout must never give up a load the parse
// itself still allows, whatever MAX_RULE_TREE_BYTES is set to (it may be raised to 2^40).
import { describe, expect, it } from 'vitest';
import { DEFAULT_MAX_RULE_TREE_BYTES } from '../../../src/config/load-rule-directory';
import { MAX_RULE_FILE_BYTES } from '../../../src/config/parse-rule-file';
import { parseTimeoutMs } from '../../../src/config/parse-rule-files';
import { DEFAULT_LOAD_TIMEOUT_MS, loadTimeoutFor } from '../../../src/config/rules-watcher';

const MIB = 1024 * 1024;

describe('the rule load timeout', () => {
  it('gives a parse a minute per 512 KiB of rule text, in one deadline for the whole tree', () => {
    expect(parseTimeoutMs(0)).toBe(60_000);
    expect(parseTimeoutMs(MAX_RULE_FILE_BYTES)).toBe(60_000);
    expect(parseTimeoutMs(MAX_RULE_FILE_BYTES + 1)).toBe(120_000);
    expect(parseTimeoutMs(5 * MAX_RULE_FILE_BYTES)).toBe(300_000);
  });

  it('is above the parse deadline, with time to read, for every tree budget', () => {
    for (const bytes of [MAX_RULE_FILE_BYTES, DEFAULT_MAX_RULE_TREE_BYTES, 3 * MIB, 64 * MIB, 2 ** 40]) {
      expect(loadTimeoutFor(bytes)).toBeGreaterThanOrEqual(parseTimeoutMs(bytes) + 60_000);
      expect(loadTimeoutFor(bytes)).toBeGreaterThanOrEqual(DEFAULT_LOAD_TIMEOUT_MS);
    }
    expect(loadTimeoutFor(DEFAULT_MAX_RULE_TREE_BYTES)).toBe(180_000);
  });
});
