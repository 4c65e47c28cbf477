// Runs one attack against a fresh built server (dist/) on loopback and measures, from outside:
// the server's peak resident memory (VmHWM in /proc/<pid>/status), its worst event-loop delay
// (prom-client's nodejs_eventloop_lag_max_seconds, read from /metrics: it covers the time since
// the previous scrape), and an ordinary client's calls made during the attack (own process).
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { freePort } from '../harness/free-port';
import { podMemoryBoundMib } from '../helpers/pod-memory';
import { spawnServer, type ServerWithRules } from '../helpers/server-process';

/** Targets of issue 8 for every attack. */
export const TARGETS = { maxRssMb: 300, maxStallMs: 100 } as const;

/**
 * Deadline of each probe call; an ordinary client's call must be answered within it. Generous:
 * on the shared 2-core machine these suites run on, an idle process alone is at times not
 * scheduled for over half a second; a stall of the server (the 4 MiB request: seconds) still
 * shows.
 */
export const PROBE_DEADLINE_MS = 2000;
const PROBE_INTERVAL_MS = 25;
const BASELINE_MS = 1000;
const NO_PROBE: AttackReport['probe'] = { calls: 0, answered: 0, late: 0, failed: 0, worstMs: 0, controlStallMs: 0, errors: {} };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export const PROBE_RULES = `domain: probe
descriptors:
  - key: k
    rate_limit: {unit: second, requests_per_unit: 1000000}
`;

/** The rules every attack runs against. */
export const ABUSE_RULES = `domain: abuse
descriptors:
  - key: user
    rate_limit: {unit: day, requests_per_unit: 1000}
  - key: wild
    value: "*a*a*b"
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: wild2
    value: "*a*b"
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: detailed
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: zero
    rate_limit: {unit: hour, requests_per_unit: 0}
  - key: log
    rate_limit: {unit: hour, requests_per_unit: 1000, algorithm: sliding_log}
`;

export type Scale = 'short' | 'full';

/** What an attack can reach. */
export interface AttackContext {
  readonly server: ServerWithRules;
  readonly grpcAddress: string;
  readonly scale: Scale;
  /** Scrapes /metrics (also noting the event-loop lag it reports); returns the text. */
  scrape(): Promise<string>;
  /** Counts one answer under `name`. */
  answer(name: string, count?: number): void;
  /** The answers counted so far. */
  readonly answers: Readonly<Record<string, number>>;
  /** Free-form figures the attack measured (e.g. /metrics size). */
  note(name: string, value: string | number): void;
}

/** What an attack starts before the server (a management server), and how to stop it. */
export interface AttackSetup {
  /** Extra environment of the server. */
  readonly env: Record<string, string>;
  teardown(): Promise<void>;
}

export interface Attack {
  readonly name: string;
  /** Extra environment of the server (may start something the server talks to first). */
  readonly env?: (ctx: { redisUrl?: string }) => Record<string, string> | Promise<Record<string, string>>;
  /** Stops what `env` started, whatever happened. */
  readonly dispose?: () => Promise<void>;
  readonly needsRedis?: boolean;
  /**
   * Its peak RSS must stay under 80 % of the shipped pod's memory limit (issue 26), not only
   * TARGETS.maxRssMb: the attacks on what the process keeps in memory.
   */
  readonly withinPodLimit?: boolean;
  /** Rule files of its own beside ABUSE_RULES and PROBE_RULES (name → text). */
  readonly rules?: Record<string, string>;
  /** Started before the server, stopped after it (its environment added to the server's). */
  setup?(): Promise<AttackSetup>;
  run(ctx: AttackContext): Promise<void>;
}

export interface AttackReport {
  readonly name: string;
  readonly peakRssMb: number;
  /** The peak RSS it must stay under. */
  readonly rssTargetMb: number;
  /** Worst event-loop delay during the attack. */
  readonly stallMs: number;
  /** Worst event-loop delay of the same server, idle, for one second before the attack. */
  readonly baselineStallMs: number;
  readonly probe: {
    calls: number;
    answered: number;
    late: number;
    failed: number;
    worstMs: number;
    /** The probe process's own worst event-loop delay: what the machine alone costs. */
    controlStallMs: number;
    errors: Record<string, number>;
  };
  readonly answers: Record<string, number>;
  readonly notes: Record<string, string | number>;
  readonly survived: boolean;
  readonly error?: string;
}

function rssFigures(pid: number): { rssMb: number; peakMb: number } {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0);
    return { rssMb: kb('VmRSS') / 1024, peakMb: kb('VmHWM') / 1024 };
  } catch {
    return { rssMb: 0, peakMb: 0 };
  }
}

export function httpGet(port: number, path: string, timeoutMs = 10_000): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, method: 'GET', timeout: timeoutMs }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end();
  });
}

function lagMaxMs(metrics: string): number {
  const m = /^nodejs_eventloop_lag_max_seconds (\S+)$/m.exec(metrics);
  return m ? Number(m[1]) * 1000 : 0;
}

interface Probe {
  /** Resolves once a first call was answered (the client is loaded and connected). */
  readonly ready: Promise<void>;
  stop(): Promise<AttackReport['probe']>;
}

function startProbe(grpcAddress: string): Probe {
  const child = spawn(
    process.execPath,
    [join(__dirname, 'probe-client.js'), grpcAddress, String(PROBE_INTERVAL_MS), String(PROBE_DEADLINE_MS)],
    {
      stdio: ['pipe', 'pipe', 'inherit'],
    },
  );
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const ready = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('probe client not ready within 20 s')), 20_000);
    const check = (): void => {
      if (out.startsWith('ready\n')) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout.on('data', check);
    void exited.then(() => reject(new Error('probe client exited')));
  });
  ready.catch(() => {});
  return {
    ready,
    async stop() {
      child.stdin.end();
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
      try {
        return JSON.parse(out.replace(/^ready\n/, '')) as AttackReport['probe'];
      } catch {
        return { ...NO_PROBE, failed: 1, errors: { 'probe did not report': 1 } };
      }
    },
  };
}

/** Spawns a server, runs the attack with the probe beside it, and reports. Always cleans up. */
export async function runAttack(attack: Attack, scale: Scale, redisUrl?: string): Promise<AttackReport> {
  try {
    return await runAttackOnce(attack, scale, redisUrl);
  } finally {
    await attack.dispose?.();
  }
}

async function runAttackOnce(attack: Attack, scale: Scale, redisUrl?: string): Promise<AttackReport> {
  const metricsPort = await freePort();
  const setup = await attack.setup?.();
  const server = await spawnServer(
    { 'probe.yaml': PROBE_RULES, 'abuse.yaml': ABUSE_RULES, ...attack.rules },
    {
      USE_PROMETHEUS: 'true',
      PROMETHEUS_ADDR: `127.0.0.1:${metricsPort}`,
      ...((await attack.env?.(redisUrl ? { redisUrl } : {})) ?? {}),
      ...setup?.env,
    },
  ).catch(async (err: unknown) => {
    await setup?.teardown();
    throw err;
  });
  const pid = server.proc.pid as number;
  const answers: Record<string, number> = {};
  const notes: Record<string, string | number> = {};
  let stallMs = 0;
  let baselineStallMs = 0;
  let peakRssMb = 0;
  const sampler = setInterval(() => (peakRssMb = Math.max(peakRssMb, rssFigures(pid).peakMb)), 100);
  const scrape = async (): Promise<string> => {
    const { body } = await httpGet(metricsPort, '/metrics', 30_000);
    stallMs = Math.max(stallMs, lagMaxMs(body));
    return body;
  };
  const grpcAddress = `127.0.0.1:${server.grpcPort}`;
  let error: string | undefined;
  let probe: AttackReport['probe'] | undefined;
  try {
    const prober = startProbe(grpcAddress);
    try {
      await prober.ready;
      // The event-loop delay of the idle server, with the probe running, over one second: on a
      // busy machine the process is not scheduled at once, and that is not the attack's doing.
      await scrape();
      await sleep(BASELINE_MS);
      stallMs = 0;
      await scrape();
      baselineStallMs = stallMs;
      stallMs = 0;
      await attack.run({
        server,
        grpcAddress,
        scale,
        scrape,
        answer: (name, count = 1) => (answers[name] = (answers[name] ?? 0) + count),
        answers,
        note: (name, value) => (notes[name] = value),
      });
    } catch (err) {
      error = (err as Error).message;
    } finally {
      probe = await prober.stop();
    }
    await scrape().catch((err: Error) => (error ??= `final scrape: ${err.message}`));
  } finally {
    clearInterval(sampler);
  }
  peakRssMb = Math.max(peakRssMb, rssFigures(pid).peakMb);
  const survived = server.proc.exitCode === null && server.proc.signalCode === null;
  if (!survived) error ??= `server exited: ${server.output().slice(-500)}`;
  server.cleanup();
  await setup?.teardown();
  return {
    name: attack.name,
    peakRssMb,
    rssTargetMb: attack.withinPodLimit ? Math.min(TARGETS.maxRssMb, podMemoryBoundMib()) : TARGETS.maxRssMb,
    stallMs,
    baselineStallMs,
    probe: probe ?? NO_PROBE,
    answers,
    notes,
    survived,
    ...(error ? { error } : {}),
  };
}

/** The targets other than the event-loop stall that this report misses, in words. */
export function missedTargetsBesidesStall(r: AttackReport): string[] {
  const missed: string[] = [];
  if (!r.survived) missed.push('process died');
  if (r.peakRssMb >= r.rssTargetMb) missed.push(`peak RSS ${r.peakRssMb.toFixed(0)} MB >= ${r.rssTargetMb.toFixed(0)} MB`);
  if (r.probe.calls === 0 || r.probe.answered !== r.probe.calls) {
    missed.push(
      `ordinary client: ${r.probe.answered}/${r.probe.calls} calls answered within ${PROBE_DEADLINE_MS} ms (late ${r.probe.late}, failed ${JSON.stringify(r.probe.errors)})`,
    );
  }
  if (r.error) missed.push(`attack error: ${r.error}`);
  return missed;
}

/**
 * The event-loop stall target, in words when missed. It is the stall the attack causes, beyond
 * what the machine alone costs. Two controls measure that cost: the probe's own event-loop
 * delay over the same time (~10 ms on an idle machine; a light process's wait for a core), and
 * the same server's delay while idle just before the attack (same process, same heap). The
 * larger one counts; the server, busy, waits for a core more often than when idle, hence twice
 * that as margin.
 */
export function missedStall(r: AttackReport): string | undefined {
  const control = Math.max(r.probe.controlStallMs, r.baselineStallMs);
  const allowed = TARGETS.maxStallMs + 2 * control;
  if (r.stallMs < allowed) return undefined;
  return (
    `event-loop stall ${r.stallMs.toFixed(0)} ms >= ${TARGETS.maxStallMs} ms + 2 × control ${control.toFixed(0)} ms ` +
    `(probe ${r.probe.controlStallMs.toFixed(0)}, idle server ${r.baselineStallMs.toFixed(0)})`
  );
}

/** One line per attack. */
export function formatReport(r: AttackReport): string {
  const answers = Object.entries(r.answers)
    .map(([k, v]) => `${k}=${v}`)
    .join(' ');
  const notes = Object.entries(r.notes)
    .map(([k, v]) => `${k}=${v}`)
    .join(' ');
  return (
    `${r.name.padEnd(46)} peakRSS ${r.peakRssMb.toFixed(0).padStart(4)} MB  stall ${r.stallMs.toFixed(0).padStart(5)} ms (idle ${r.baselineStallMs.toFixed(0)}, control ${r.probe.controlStallMs.toFixed(0)})  ` +
    `probe ${r.probe.answered}/${r.probe.calls} worst ${r.probe.worstMs.toFixed(0)} ms  ${r.survived ? 'alive' : 'DIED'}  ` +
    `answers: ${answers}${notes ? `  (${notes})` : ''}`
  );
}
