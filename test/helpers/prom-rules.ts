// floodgate's alert rules through Prometheus' own code: test/prom-rules is a small Go program on
// github.com/prometheus/prometheus (model/rulefmt, the rule parser Prometheus and promtool load
// rule files with; promql, its query engine, over a TSDB), built by goTestProgram once into
// ~/.cache/floodgate-test keyed by its sources. The first build downloads Prometheus' module
// through the Go module proxy (several minutes on a busy 2-core machine); later ones reuse it.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { goTestProgram } from './go-test-program';

export function promRulesBinary(): string {
  return goTestProgram('prom-rules', ['go.mod', 'go.sum', 'main.go']);
}

/** Prometheus' rule parser's errors for each file (a rule file or a PrometheusRule object); none = valid. */
export function ruleParseErrors(...files: string[]): string[] {
  const out = execFileSync(promRulesBinary(), ['check', ...files], { encoding: 'utf8' });
  return (JSON.parse(out) as { errors: string[] }).errors;
}

/** A /metrics text as it was scraped, and when (seconds from the first scrape). */
export interface TimedScrape {
  readonly seconds: number;
  readonly text: string;
}

/**
 * Loads the scrapes into Prometheus' TSDB and evaluates every alert's expression with its PromQL
 * engine at the last scrape: the series each returns (above 0: the alert fires, once its `for` passed).
 */
export function evaluateAlerts(rulesFile: string, scrapes: readonly TimedScrape[]): Record<string, number> {
  const dir = mkdtempSync(join(tmpdir(), 'floodgate-scrapes-'));
  try {
    const args = scrapes.map((s, i) => {
      const path = join(dir, `${i}.prom`);
      writeFileSync(path, s.text);
      return `${s.seconds}=${path}`;
    });
    const out = execFileSync(promRulesBinary(), ['eval', rulesFile, ...args], { encoding: 'utf8' });
    return (JSON.parse(out) as { alerts: Record<string, number> }).alerts;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
