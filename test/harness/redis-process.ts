import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { releaseDir, trackChild, trackDir } from './cleanup-registry';
import { freePort } from './free-port';
import { REDIS_SERVER_BIN, requireRedisServer } from './redis-binary';
import { parseInfo, respCommand, type RespValue } from './resp-client';
import { sleep, waitUntil } from './wait';

export const HOST = '127.0.0.1';
// A busy machine may take a while to start a process.
const START_TIMEOUT_MS = 30_000;
const STOP_GRACE_MS = 2_000;
const PORT_ATTEMPTS = 5;

export interface RedisProcessOptions {
  /** `server` (default) or `sentinel` (`redis-server <conf> --sentinel`). */
  readonly mode?: 'server' | 'sentinel';
  /** Extra configuration lines written to the config file (after port, bind, dir, logfile). */
  readonly config?: readonly string[];
  /** Extra command-line arguments, e.g. `['--maxmemory', '10mb']`. */
  readonly extraArgs?: readonly string[];
  /** requirepass; the harness authenticates its own probes with it. */
  readonly password?: string;
  /**
   * Cluster mode: reserves port + 10000 for the cluster bus and writes `cluster-enabled yes`
   * with `cluster-config-file <dir>/nodes.conf`.
   */
  readonly cluster?: boolean;
  /** Name used in error messages. */
  readonly label?: string;
}

/**
 * One real redis-server (or sentinel) process on a loopback port with its own temp dir.
 * The port and dir survive restart(), so a restarted node keeps its identity (cluster nodes.conf)
 * but loses everything in memory, scripts included.
 */
export class RedisProcess {
  readonly host = HOST;
  readonly dir: string;
  private portValue = 0;
  private child: ChildProcess | undefined;
  private exited: Promise<void> = Promise.resolve();
  private output = '';
  private removed = false;

  private constructor(private readonly options: RedisProcessOptions) {
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'floodgate-redis-'));
    trackDir(this.dir);
  }

  /** Starts a process on a fresh free port, retrying with another port if it was taken meanwhile. */
  static async start(options: RedisProcessOptions = {}): Promise<RedisProcess> {
    requireRedisServer();
    const server = new RedisProcess(options);
    try {
      await server.launch(true);
    } catch (err) {
      await server.stop();
      throw err;
    }
    return server;
  }

  get port(): number {
    return this.portValue;
  }

  /** `127.0.0.1:<port>` */
  get url(): string {
    return `${HOST}:${this.portValue}`;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get label(): string {
    return `${this.options.label ?? this.options.mode ?? 'redis'} ${this.url}`;
  }

  get logFile(): string {
    return path.join(this.dir, 'redis.log');
  }

  get configFile(): string {
    return path.join(this.dir, 'redis.conf');
  }

  isRunning(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Sends one command on a fresh connection (authenticated when a password is set). */
  command(...args: (string | number)[]): Promise<RespValue> {
    return respCommand(HOST, this.portValue, args, { password: this.options.password });
  }

  /** INFO [section] as a field map. */
  async info(section?: string): Promise<Map<string, string>> {
    return parseInfo(await this.command(...(section ? ['INFO', section] : ['INFO'])));
  }

  /** Last lines of the server log and of anything it printed, for error messages. */
  logTail(lines = 25): string {
    let log = '';
    try {
      log = fs.readFileSync(this.logFile, 'utf8');
    } catch {
      // not written yet
    }
    const tail = (log + this.output).trimEnd().split('\n').slice(-lines).join('\n');
    return `--- last lines of ${this.label} (${this.logFile}) ---\n${tail}`;
  }

  /** Sends `signal` (default SIGKILL) and waits until the process is gone. Keeps the temp dir. */
  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    if (!this.isRunning()) return;
    this.child?.kill(signal);
    await this.waitForExit(5_000);
  }

  /** Stops the process (if running) and starts it again on the same port and dir. */
  async restart(): Promise<void> {
    await this.halt();
    await this.launch(false);
  }

  /** SIGTERM, SIGKILL after 2 s, then removes the temp dir. Safe to call twice. */
  async stop(): Promise<void> {
    await this.halt();
    if (!this.removed) {
      this.removed = true;
      fs.rmSync(this.dir, { recursive: true, force: true });
      releaseDir(this.dir);
    }
  }

  private async halt(): Promise<void> {
    if (!this.isRunning()) return;
    this.child?.kill('SIGTERM');
    if (await this.waitForExit(STOP_GRACE_MS)) return;
    this.child?.kill('SIGKILL');
    if (!(await this.waitForExit(5_000))) throw new Error(`${this.label} survived SIGKILL`);
  }

  private async waitForExit(timeoutMs: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), timeoutMs);
    });
    const result = await Promise.race([this.exited.then(() => true), timeout]);
    clearTimeout(timer);
    return result;
  }

  private async launch(newPort: boolean): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      if (newPort) {
        this.portValue = await freePort({ withClusterBus: this.options.cluster });
        // A fresh log per attempt, so an old "address in use" does not decide about this one.
        fs.rmSync(this.logFile, { force: true });
        this.output = '';
      }
      this.writeConfig();
      this.spawnChild();
      const outcome = await this.waitForReady();
      if (outcome === 'ready') return;
      const portTaken = /address already in use/i.test(this.logTail(50));
      if (newPort && portTaken && attempt < PORT_ATTEMPTS) continue;
      throw new Error(`${this.label} did not start (${outcome}${portTaken ? ', port in use' : ''})\n${this.logTail()}`);
    }
  }

  private writeConfig(): void {
    const sentinel = this.options.mode === 'sentinel';
    const lines = [
      `port ${this.portValue}`,
      `bind ${HOST}`,
      `dir ${this.dir}`,
      `logfile ${this.logFile}`,
      'daemonize no',
      // Loopback only; protected mode would refuse sentinel and cluster peers without a password.
      'protected-mode no',
      ...(sentinel ? [] : ['save ""', 'appendonly no']),
      ...(this.options.password === undefined ? [] : [`requirepass ${this.options.password}`]),
      ...(this.options.cluster ? ['cluster-enabled yes', `cluster-config-file ${path.join(this.dir, 'nodes.conf')}`] : []),
      ...(this.options.config ?? []),
    ];
    // Sentinel rewrites its own file (it must stay writable), so only write it the first time.
    if (!sentinel || !fs.existsSync(this.configFile)) {
      fs.writeFileSync(this.configFile, lines.join('\n') + '\n');
    }
  }

  private spawnChild(): void {
    const args = [this.configFile, ...(this.options.mode === 'sentinel' ? ['--sentinel'] : [])];
    const child = spawn(REDIS_SERVER_BIN, [...args, ...(this.options.extraArgs ?? [])], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    trackChild(child);
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()));
    const collect = (chunk: Buffer): void => {
      this.output = (this.output + chunk.toString('utf8')).slice(-8192);
    };
    child.stdout?.on('data', collect);
    child.stderr?.on('data', collect);
    child.once('error', (err) => collect(Buffer.from(`spawn error: ${err.message}\n`)));
  }

  /** Ready when the server answers INFO with our own pid (not some other process on the port). */
  private async waitForReady(): Promise<'ready' | 'exited' | 'timeout'> {
    const child = this.child;
    const deadline = Date.now() + START_TIMEOUT_MS;
    while (Date.now() < deadline) {
      if (!this.isRunning()) return 'exited';
      try {
        const info = await this.info('server');
        if (Number(info.get('process_id')) === child?.pid) return 'ready';
      } catch {
        // not listening yet
      }
      await sleep(25);
    }
    if (!this.isRunning()) return 'exited';
    await this.halt();
    return 'timeout';
  }
}

/** Polls `probe` with the server's log tail in the timeout error. */
export function waitForServer<T>(
  servers: readonly RedisProcess[],
  what: string,
  probe: () => Promise<T | undefined | false>,
  timeoutMs: number,
): Promise<T> {
  return waitUntil(what, probe, {
    timeoutMs,
    intervalMs: 100,
    diagnostics: () => servers.map((s) => s.logTail(15)).join('\n'),
  });
}
