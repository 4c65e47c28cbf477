// The debug page's per-rule totals follow the rule set in service: a real rule-file reload (the
// watcher, real files) drops the totals of a rule that left, and a rule that stays keeps its own.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, test } from 'vitest';
import { startMetrics } from '../../src/app/metrics';
import { startRules } from '../../src/app/rules';
import { closeRunning, type Running } from '../../src/app/running';
import { createLogger } from '../../src/base/log';
import { RuleActivity } from '../../src/metrics/rule-activity';
import { loadSettings } from '../../src/settings/settings';
import { waitUntil } from '../harness/wait';

const root = mkdtempSync(join(tmpdir(), 'floodgate-activity-reload-'));
mkdirSync(join(root, 'config'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const COUNTS = { totalHits: 1, withinLimit: 1, nearLimit: 0, overLimit: 0, overLimitWithLocalCache: 0, shadowMode: 0 };
const rule = (key: string): string => `  - key: ${key}\n    rate_limit: { unit: minute, requests_per_unit: 10 }\n`;

test('a rule removed by a file reload loses its totals; a rule kept keeps them', { timeout: 60_000 }, async () => {
  writeFileSync(join(root, 'config', 'svc.yaml'), `domain: svc\ndescriptors:\n${rule('a')}${rule('b')}`);
  const settings = loadSettings({
    RUNTIME_ROOT: root,
    RUNTIME_WATCH_ROOT: 'false',
    BACKEND_TYPE: 'memory',
    USE_PROMETHEUS: 'false',
    USE_STATSD: 'false',
  });
  const logger = createLogger('ERROR', 'text');
  const running: Running = { listeners: [], stats: [] };
  const { core } = await startMetrics(settings, logger, running);
  const activity = new RuleActivity();
  try {
    const holder = await startRules(settings, core, running, (loaded) => activity.rulesLoaded(loaded));
    const first = holder.current!;
    for (const r of first.rulesByDomain.get('svc')!) activity.record('svc', r, COUNTS);
    expect(activity.size).toBe(2);
    writeFileSync(join(root, 'config', 'svc.yaml'), `domain: svc\ndescriptors:\n${rule('a')}`);
    await waitUntil('the reload', () => holder.current !== first, { timeoutMs: 30_000, intervalMs: 50 });
    expect(activity.size).toBe(1);
    const kept = holder.current!.rulesByDomain.get('svc')![0]!;
    expect(kept.fullKey).toBe('svc.a');
    expect(activity.totals('svc', kept).hits).toBe(1);
  } finally {
    await closeRunning(running, 0);
  }
});
