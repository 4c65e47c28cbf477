import { loadRuleTree } from '../config/load-rule-directory';
import { ruleTreeOf } from '../config/rule-tree';
import type { RuleSet } from '../config/rule-types';
import { sharedLayoutReport } from '../config/shared-layout-report';
import { loadTimeoutFor, RulesWatcher } from '../config/rules-watcher';
import { XdsRulesClient } from '../config/xds/xds-rules-client';
import type { Logger } from '../base/log';
import type { ServiceMetrics } from '../metrics/metrics';
import type { Settings } from '../settings/settings';

import type { Running, Core } from './running';

// The rules source of a running app: rule files (watched) or xDS, and the holder it swaps.

/**
 * The rule loader both the first load and every reload use (and `floodgate check` without a
 * directory); the whole load fails on any error.
 */
export function ruleLoader(settings: Settings): (signal?: AbortSignal) => Promise<RuleSet> {
  const options = {
    mergeDomainConfig: settings.mergeDomainConfig,
    ignoreDotFiles: settings.runtimeIgnoreDotFiles,
    maxTreeBytes: settings.maxRuleTreeBytes,
  };
  const tree = ruleTreeOf({
    root: settings.runtimeRoot,
    subdirectory: settings.runtimeSubdirectory,
    appDirectory: settings.runtimeAppDirectory,
    watchRoot: settings.runtimeWatchRoot,
  });
  return (signal) => loadRuleTree(tree, { ...options, ...(signal && { signal }) });
}

/** The first load; without good rules the start fails, unless FORCE_START_WITHOUT_INITIAL_CONFIG. */
async function loadStartupRules(
  load: () => Promise<RuleSet>,
  settings: Settings,
  logger: Logger,
  metrics: ServiceMetrics,
): Promise<RuleSet | undefined> {
  try {
    const rules = await load();
    metrics.configLoad(true);
    return rules;
  } catch (err) {
    metrics.configLoad(false);
    if (!settings.forceStartWithoutInitialConfig) throw err;
    logger.warn('starting without rules (FORCE_START_WITHOUT_INITIAL_CONFIG)', { error: (err as Error).message });
    return undefined;
  }
}

/**
 * REDIS_KEY_LAYOUT=reference (issue 30): says, once per rule set put in service, how many rules
 * keep floodgate's own keys and why. Nothing in floodgate's layout or with the memory backend.
 */
function reportKeyLayout(settings: Settings, logger: Logger, rules: RuleSet): void {
  if (settings.redisKeyLayout !== 'reference' || settings.backendType !== 'redis') return;
  const line = sharedLayoutReport(rules);
  logger.info(line ?? "REDIS_KEY_LAYOUT=reference: every rule counts in the reference's own keys");
}

/** The rule set in use, swapped whole by each successful reload. */
export interface RulesHolder {
  current: RuleSet | undefined;
}

/**
 * Starts the rules source and returns the holder it swaps. Files: watching starts, then the
 * first load; the baseline comes first, so no change falls in between. xDS: the rules arrive
 * with the first snapshot, as in the reference (the ports open without waiting for it).
 * `inService` hears each rule set put in service (first load and reloads).
 */
export async function startRules(
  settings: Settings,
  { logger, metrics, operator }: Core,
  running: Running,
  inService: (rules: RuleSet) => void = () => undefined,
): Promise<RulesHolder> {
  const holder: RulesHolder = { current: undefined };
  const onLoaded = (rules: RuleSet): void => {
    holder.current = rules;
    operator.rulesLoaded(rules);
    inService(rules);
    metrics.configLoad(true);
    logger.info('rules reloaded', { domains: rules.domainCount });
    reportKeyLayout(settings, logger, rules);
  };
  if (settings.xds) {
    const client = new XdsRulesClient({
      settings: settings.xds,
      mergeDomainConfig: settings.mergeDomainConfig,
      logger,
      onLoaded,
      onError: (err, { log, unlogged }) => {
        metrics.configLoad(false);
        operator.xdsNack();
        operator.loadFailed(`xDS: ${err.message}`);
        // Paced by the client: a server sending bad snapshots in a loop cannot flood the log.
        const since = unlogged > 0 ? ` (and ${unlogged} more rejected snapshots not logged since the last)` : '';
        if (log) logger.error(`error loading new configuration from xDS: ${err.message}${since}`);
      },
    });
    running.rulesSource = client;
    client.start();
    return holder;
  }
  const load = ruleLoader(settings);
  const watcher = new RulesWatcher({
    root: settings.runtimeRoot,
    subdirectory: settings.runtimeSubdirectory,
    appDirectory: settings.runtimeAppDirectory,
    watchRoot: settings.runtimeWatchRoot,
    ignoreDotFiles: settings.runtimeIgnoreDotFiles,
    load,
    loadTimeoutMs: loadTimeoutFor(settings.maxRuleTreeBytes),
    onLoaded,
    onError: (err) => {
      metrics.configLoad(false);
      operator.loadFailed(err.message);
      logger.error(`error loading new configuration from runtime: ${err.message}`);
    },
  });
  running.rulesSource = watcher;
  await watcher.start();
  holder.current = await loadStartupRules(load, settings, logger, metrics);
  if (holder.current !== undefined) {
    operator.rulesLoaded(holder.current);
    inService(holder.current);
    reportKeyLayout(settings, logger, holder.current);
  }
  return holder;
}
