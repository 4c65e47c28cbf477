import cluster from 'node:cluster';
import { hostname } from 'node:os';
import type { Registry } from 'prom-client';
import type { RateLimitRule, RuleSet } from '../config/rule-types';
import { TIERS, type PolicyConfig } from '../domain/policy-config';
import type { RuleActivity } from '../metrics/rule-activity';
import type { Route } from './http-listener';

/** What the debug page shows, read live on each refresh. */
export interface DebugPageSources {
  readonly rules: () => RuleSet | undefined;
  readonly registry: Registry;
  readonly backendType: string;
  /** Which Redis key layout is in force, in an operator's words (issue 30): see keyLayoutText. */
  readonly keyLayout: string;
  readonly backendHealthy: () => boolean;
  readonly serving: () => boolean;
  readonly breakers: () => readonly { node: string; open: boolean }[];
  /** Epoch seconds of the last good rule load. */
  readonly lastLoad: () => number | undefined;
  /** The last failed rule load (epoch seconds and message), if any. */
  readonly lastLoadError: () => { readonly at: number; readonly message: string } | undefined;
  /** Per-rule totals, kept by rule (a detailed_metric rule's labels carry request values). */
  readonly activity: RuleActivity;
}

/**
 * Which process answers: behind a Service each refresh may reach another pod, and with WORKERS
 * another worker; the page shows whose numbers it has.
 */
function instance(): { hostname: string; pid: number; worker?: number } {
  return { hostname: hostname(), pid: process.pid, ...(cluster.isWorker && cluster.worker ? { worker: cluster.worker.id } : {}) };
}

/** Decisions per tier so far, by `domain` (floodgate_policy_decisions_total, shadow or not). */
async function decisionsByTier(registry: Registry): Promise<Map<string, Record<string, number>>> {
  const out = new Map<string, Record<string, number>>();
  const metric = registry.getSingleMetric('floodgate_policy_decisions_total');
  if (metric === undefined) return out;
  for (const v of (await metric.get()).values) {
    const domain = String(v.labels['domain']);
    const tiers = out.get(domain) ?? Object.fromEntries(TIERS.map((t) => [t, 0]));
    tiers[String(v.labels['tier'])] = (tiers[String(v.labels['tier'])] ?? 0) + v.value;
    out.set(domain, tiers);
  }
  return out;
}

function policyState(policy: PolicyConfig, decisions: Map<string, Record<string, number>>) {
  const t = policy.thresholds;
  return {
    domain: policy.domain,
    client: policy.client,
    thresholds: `elevated ${t.elevated}, suspicious ${t.suspicious}, blocked ${t.blocked}`,
    shadowMode: policy.shadowMode,
    decisions: decisions.get(policy.domain) ?? Object.fromEntries(TIERS.map((tier) => [tier, 0])),
  };
}

/** The page's data: domains, rules with live totals, policies, backend health, breakers, loads. */
export async function debugState(sources: DebugPageSources): Promise<unknown> {
  const rules = sources.rules();
  const decisions = await decisionsByTier(sources.registry);
  const domains = [...(rules?.rulesByDomain ?? new Map<string, readonly RateLimitRule[]>())]
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([domain, list]) => ({
      domain,
      rules: list.map((r) => ({
        fullKey: r.fullKey,
        name: r.limitName ?? r.name ?? '',
        limit: r.unlimited ? 'unlimited' : `${r.requestsPerUnit} / ${r.windowSeconds} s`,
        algorithm: r.algorithm,
        shadowMode: r.shadowMode,
        // By rule, whatever labels its metrics carry (detailed_metric, value_to_metric, a list's limit).
        totals: sources.activity.totals(domain, r),
      })),
    }));
  return {
    generatedAt: new Date().toISOString(),
    instance: instance(),
    serving: sources.serving(),
    backend: { type: sources.backendType, healthy: sources.backendHealthy(), keyLayout: sources.keyLayout },
    breakers: sources.breakers(),
    lastLoad: sources.lastLoad() ?? null,
    lastLoadError: sources.lastLoadError() ?? null,
    policies: (rules?.policies ?? []).map((p) => policyState(p, decisions)),
    domains,
  };
}

/**
 * The key layout line of the page: REDIS_KEY_LAYOUT, and with floodgate's own keys whether the
 * reference's counts are carried over (REDIS_KEY_LAYOUT_CARRY_OVER, ms; 0 off).
 */
export function keyLayoutText(backendType: string, layout: 'floodgate' | 'reference', carryOverMs: number, untilMs?: number): string {
  if (backendType !== 'redis') return `none (${backendType} backend)`;
  const shared = "reference: the reference's own keys, shared with envoyproxy/ratelimit (REDIS_KEY_LAYOUT=reference)";
  if (layout === 'reference' && untilMs !== undefined) {
    return `${shared} until ${new Date(untilMs).toISOString()}, then floodgate's own keys, the windows longer than a minute in progress carried over (REDIS_KEY_LAYOUT_UNTIL)`;
  }
  if (layout === 'reference') return shared;
  if (carryOverMs <= 0) return 'floodgate: its own keys';
  return `floodgate: its own keys, carrying the reference's counts over for windows longer than a minute begun within ${goDuration(carryOverMs)} of start (REDIS_KEY_LAYOUT_CARRY_OVER)`;
}

/** `15m`, `2h`, `1h30m`, `90s`, `250ms`: a duration as the setting would be written. */
function goDuration(ms: number): string {
  if (ms % 1000 !== 0) return `${ms}ms`;
  let s = ms / 1000;
  const h = Math.floor(s / 3600);
  s -= h * 3600;
  const m = Math.floor(s / 60);
  s -= m * 60;
  return (h > 0 ? `${h}h` : '') + (m > 0 ? `${m}m` : '') + (s > 0 ? `${s}s` : '');
}

export function debugStateRoute(sources: DebugPageSources): Route {
  return (_req, res) => {
    debugState(sources).then(
      (state) => res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' }).end(JSON.stringify(state)),
      (err: unknown) => res.writeHead(500, { 'content-type': 'text/plain' }).end(String(err)),
    );
  };
}

export const REFRESH_MS = 2000;

// Plain DOM code, no framework; every value goes in through textContent, never as HTML.
const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>floodgate</title>
<style>
  body { font: 14px system-ui, sans-serif; margin: 1.5em; color: #222; }
  h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 1.5em; }
  table { border-collapse: collapse; margin: .5em 0; }
  th, td { border: 1px solid #ccc; padding: .25em .6em; text-align: left; }
  td.n { text-align: right; font-variant-numeric: tabular-nums; }
  .bad { color: #b00; font-weight: bold; } .good { color: #070; }
  #status { color: #666; }
</style>
</head>
<body>
<h1>floodgate</h1>
<p id="status">loading…</p>
<p>answering: <span id="instance"></span> (behind a Service, each refresh may reach another pod: every number here is that process's own)</p>
<h2>Backend</h2>
<p>type <span id="backend-type"></span>, <span id="backend-health"></span>, service <span id="serving"></span>, rules loaded <span id="last-load"></span></p>
<p>key layout: <span id="key-layout"></span></p>
<p>last failed reload: <span id="last-load-error"></span></p>
<table id="breakers"><thead><tr><th>Redis node</th><th>circuit</th></tr></thead><tbody></tbody></table>
<div id="policies"></div>
<div id="domains"></div>
<script>
"use strict";
const REFRESH_MS = ${REFRESH_MS};
function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}
function row(cells) {
  const tr = document.createElement("tr");
  for (const c of cells) tr.appendChild(c);
  return tr;
}
// The previous refresh's totals per rule, for the rates (per second, between two refreshes of one process).
let previous = { at: 0, instance: "", totals: new Map() };
function rate(now, before, seconds) {
  if (before === undefined || seconds <= 0) return "–";
  return (Math.max(0, now - before) / seconds).toFixed(1) + "/s";
}
function render(state) {
  const who = state.instance.hostname + " (pid " + state.instance.pid + (state.instance.worker ? ", worker " + state.instance.worker : "") + ")";
  document.getElementById("instance").textContent = who;
  const at = Date.parse(state.generatedAt) / 1000;
  // Totals of another process are not comparable: no rate until two refreshes of the same one.
  const seconds = previous.instance === who ? at - previous.at : 0;
  const totals = new Map();
  document.getElementById("backend-type").textContent = state.backend.type;
  document.getElementById("key-layout").textContent = state.backend.keyLayout;
  const health = document.getElementById("backend-health");
  health.textContent = state.backend.healthy ? "healthy" : "UNHEALTHY";
  health.className = state.backend.healthy ? "good" : "bad";
  document.getElementById("serving").textContent = state.serving ? "SERVING" : "NOT_SERVING";
  document.getElementById("last-load").textContent = state.lastLoad ? new Date(state.lastLoad * 1000).toISOString() : "never";
  const loadError = document.getElementById("last-load-error");
  loadError.textContent = state.lastLoadError ? new Date(state.lastLoadError.at * 1000).toISOString() + ": " + state.lastLoadError.message : "none";
  loadError.className = state.lastLoadError ? "bad" : "";
  renderPolicies(state.policies);
  const breakers = document.querySelector("#breakers tbody");
  breakers.replaceChildren(...(state.breakers.length ? state.breakers.map((b) => row([el("td", b.node), el("td", b.open ? "OPEN" : "closed", b.open ? "bad" : "good")])) : [row([el("td", "no Redis node called yet"), el("td", "")])]));
  const domains = document.getElementById("domains");
  const sections = state.domains.map((d) => {
    const section = document.createElement("section");
    section.appendChild(el("h2", "domain " + d.domain));
    const table = document.createElement("table");
    table.appendChild(row(["rule", "name", "limit", "algorithm", "shadow", "hits", "hits/s", "over limit", "over limit/s", "near limit", "shadow hits"].map((h) => el("th", h))));
    for (const r of d.rules) {
      const key = d.domain + "|" + r.fullKey + "|" + r.name;
      const before = previous.totals.get(key);
      totals.set(key, r.totals);
      const tr = row([el("td", r.fullKey), el("td", r.name), el("td", r.limit), el("td", r.algorithm), el("td", r.shadowMode ? "yes" : "no"),
        el("td", r.totals.hits, "n hits"), el("td", rate(r.totals.hits, before && before.hits, seconds), "n hits-rate"),
        el("td", r.totals.overLimit, "n over"), el("td", rate(r.totals.overLimit, before && before.overLimit, seconds), "n over-rate"),
        el("td", r.totals.nearLimit, "n near"), el("td", r.totals.shadow, "n shadow")]);
      tr.dataset.rule = r.fullKey;
      table.appendChild(tr);
    }
    section.appendChild(table);
    return section;
  });
  domains.replaceChildren(...sections);
  previous = { at, instance: who, totals };
  document.getElementById("status").textContent = "updated " + state.generatedAt + ", every " + REFRESH_MS / 1000 + " s";
}
function renderPolicies(policies) {
  const box = document.getElementById("policies");
  if (!policies.length) return box.replaceChildren();
  const table = document.createElement("table");
  table.appendChild(row(["domain", "client", "thresholds", "normal", "elevated", "suspicious", "blocked"].map((h) => el("th", h))));
  for (const p of policies) {
    const tr = row([el("td", p.domain + (p.shadowMode ? " (shadow)" : "")), el("td", p.client), el("td", p.thresholds),
      ...["normal", "elevated", "suspicious", "blocked"].map((t) => el("td", p.decisions[t] ?? 0, "n"))]);
    tr.dataset.policy = p.domain;
    table.appendChild(tr);
  }
  box.replaceChildren(el("h2", "Policies (decisions per tier)"), table);
}
async function refresh() {
  try {
    const res = await fetch("debug/state", { cache: "no-store" });
    render(await res.json());
  } catch (err) {
    document.getElementById("status").textContent = "cannot reach floodgate: " + err;
  } finally {
    setTimeout(refresh, REFRESH_MS);
  }
}
refresh();
</script>
</body>
</html>
`;

export function debugPageRoute(): Route {
  return (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' }).end(PAGE);
  };
}
