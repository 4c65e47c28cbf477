import { watch, type FSWatcher } from 'node:fs';
import { stat } from 'node:fs/promises';
import { basename, dirname, resolve } from 'node:path';
import { ConfigError } from '../base/errors';
import { treeFingerprint } from './directory-fingerprint';
import { parseTimeoutMs } from './parse-rule-files';
import { ruleTreeOf, type RuleTree } from './rule-tree';
import type { RuleSet } from './rule-types';

export interface RulesWatcherOptions {
  /** RUNTIME_ROOT */
  readonly root: string;
  /** RUNTIME_SUBDIRECTORY */
  readonly subdirectory: string;
  /** RUNTIME_APPDIRECTORY: the rule files live in root/subdirectory/appDirectory. */
  readonly appDirectory: string;
  /**
   * RUNTIME_WATCH_ROOT. true: also watch the root (and its parent, for a root that is itself a
   * swapped symlink) so a Kubernetes `..data` swap anywhere above the files is seen at once.
   * false: watch the rule directory itself.
   */
  readonly watchRoot: boolean;
  /** RUNTIME_IGNOREDOTFILES, as the load reads it; default false (a change to a dot file then reloads too). */
  readonly ignoreDotFiles?: boolean;
  /**
   * Loads the rules (normally loadRuleTree of the same tree). `signal` aborts when the load is
   * given up: the load then stops (its parse worker is terminated), so loads never overlap.
   */
  readonly load: (signal: AbortSignal) => Promise<RuleSet>;
  /** A reload succeeded; the caller swaps its rules. */
  readonly onLoaded: (rules: RuleSet) => void;
  /** A reload failed; the caller keeps its current rules. */
  readonly onError: (err: ConfigError | Error) => void;
  /** Quiet time after the last file event before reloading; default 100 ms. */
  readonly debounceMs?: number;
  /** Poll period of the fallback that catches missed events; default 1000 ms. */
  readonly pollIntervalMs?: number;
  /**
   * A load not settled after this long is given up, stopped and reported, and tried again at
   * the next poll; default {@link DEFAULT_LOAD_TIMEOUT_MS}. The app scales it with
   * MAX_RULE_TREE_BYTES (loadTimeoutFor), so a legitimate load of a large tree is never given up.
   */
  readonly loadTimeoutMs?: number;
}

/**
 * Far above any load of the default MAX_RULE_TREE_BYTES (seconds on a busy machine): only a
 * read stuck in the kernel (a hung network file system; a FIFO is refused at open) or a parse
 * far slower than budgeted gets here. A stuck read keeps its libuv thread; reloads go on.
 */
export const DEFAULT_LOAD_TIMEOUT_MS = 120_000;

/**
 * The load timeout for trees of up to `maxTreeBytes` (MAX_RULE_TREE_BYTES): the parse's own
 * deadline for that many bytes and a minute for reading them, at least the default. A load
 * the parse would still allow is then never given up (a tree of many 512 KiB batches took
 * more than a fixed 120 s).
 */
export function loadTimeoutFor(maxTreeBytes: number): number {
  return Math.max(DEFAULT_LOAD_TIMEOUT_MS, parseTimeoutMs(maxTreeBytes) + 60_000);
}

interface WantedDirectory {
  readonly ino: bigint;
  /** Only events for this entry name count (the root's parent is shared with unrelated files). */
  readonly only?: string;
}

interface ArmedWatcher {
  readonly watcher: FSWatcher;
  readonly ino: bigint;
}

/**
 * Reloads the rules when the rule files change. fs.watch (inotify) makes a change visible at
 * once; a poll of a cheap directory fingerprint catches whatever inotify misses (events lost,
 * watched directories replaced), so a change takes effect within about a second either way.
 * A reload happens only when the fingerprint changed, so bursts and unrelated events cost a
 * few stats, not a parse.
 */
export class RulesWatcher {
  private readonly options: RulesWatcherOptions;
  private readonly tree: RuleTree;
  private readonly debounceMs: number;
  private readonly pollIntervalMs: number;
  private readonly loadTimeoutMs: number;
  private readonly watchers = new Map<string, ArmedWatcher>();
  private lastFingerprint: string | undefined;
  /** A load given up has since stopped: the next check loads again even with no change. */
  private retryLoad = false;
  /** Aborts the load in flight. */
  private loading: AbortController | undefined;
  private debounceTimer: NodeJS.Timeout | undefined;
  private burstStartedAt: number | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  private startPromise: Promise<void> | undefined;
  private checking = false;
  private checkAgain = false;
  private closed = false;

  constructor(options: RulesWatcherOptions) {
    this.options = options;
    this.tree = ruleTreeOf(options);
    this.debounceMs = options.debounceMs ?? 100;
    this.pollIntervalMs = options.pollIntervalMs ?? 1000;
    this.loadTimeoutMs = options.loadTimeoutMs ?? DEFAULT_LOAD_TIMEOUT_MS;
  }

  /**
   * Takes the current state of the rule directory as the baseline and starts watching. Every
   * change after the returned promise resolves is reloaded; call it before the initial load
   * for no gap at all. Never rejects.
   */
  start(): Promise<void> {
    this.startPromise ??= this.check(true).then(() => this.schedulePoll());
    return this.startPromise;
  }

  /** Stops watching; a reload in flight is aborted, not reported. */
  close(): void {
    this.closed = true;
    this.loading?.abort(new ConfigError('rules watcher closed'));
    clearTimeout(this.debounceTimer);
    clearTimeout(this.pollTimer);
    for (const { watcher } of this.watchers.values()) watcher.close();
    this.watchers.clear();
  }

  private schedulePoll(): void {
    if (this.closed) return;
    this.pollTimer = setTimeout(() => {
      void this.check(false).then(() => this.schedulePoll());
    }, this.pollIntervalMs);
    this.pollTimer.unref();
  }

  /** Trailing debounce, capped so a steady stream of events cannot postpone a reload forever. */
  private onFileEvent(): void {
    if (this.closed) return;
    const now = Date.now();
    this.burstStartedAt ??= now;
    const maxWaitMs = Math.max(this.debounceMs, 500);
    const delay = Math.max(0, Math.min(this.debounceMs, this.burstStartedAt + maxWaitMs - now));
    clearTimeout(this.debounceTimer);
    this.debounceTimer = setTimeout(() => {
      this.burstStartedAt = undefined;
      void this.check(false);
    }, delay);
    this.debounceTimer.unref();
  }

  /** One check at a time; a request during a check runs another right after it. Never rejects. */
  private async check(baselineOnly: boolean): Promise<void> {
    if (this.closed) return;
    if (this.checking) {
      this.checkAgain = true;
      return;
    }
    this.checking = true;
    try {
      let first = true;
      do {
        this.checkAgain = false;
        await this.checkOnce(first && baselineOnly);
        first = false;
      } while (this.checkAgain && !this.closed);
    } catch (err) {
      this.report(err);
    } finally {
      this.checking = false;
    }
  }

  private async checkOnce(baselineOnly: boolean): Promise<void> {
    // Taken before loading: a change during the load then differs from it and reloads again.
    const { text: fingerprint, directories } = await treeFingerprint(this.tree, this.options.ignoreDotFiles ?? false);
    await this.arm(directories);
    if (this.closed || (fingerprint === this.lastFingerprint && !this.retryLoad)) return;
    const isBaseline = baselineOnly || this.lastFingerprint === undefined;
    // Set even when the load fails, so a broken file is reported once, not every poll (a load
    // given up is retried: it failed for time, not for what the files say).
    this.lastFingerprint = fingerprint;
    this.retryLoad = false;
    if (!isBaseline) await this.reload();
  }

  private async reload(): Promise<void> {
    let rules: RuleSet;
    try {
      rules = await this.loadWithin();
    } catch (err) {
      if (!this.closed) this.report(err);
      return;
    }
    if (this.closed) return;
    try {
      this.options.onLoaded(rules);
    } catch (err) {
      this.report(err);
    }
  }

  /**
   * The load, or a ConfigError once loadTimeoutMs passed: the load is then aborted (its outcome
   * ignored) and, once it has stopped, retried at the next check. One that does not stop (a read
   * stuck in the kernel) is not retried until the files change: each retry would hold another
   * libuv thread.
   */
  private loadWithin(): Promise<RuleSet> {
    const stop = new AbortController();
    this.loading = stop;
    let timer: NodeJS.Timeout | undefined;
    const givenUp = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const err = new ConfigError(
          `rules not loaded within ${this.loadTimeoutMs} ms (a rule file read or parse is stuck); the rules in force stay`,
        );
        stop.abort(err);
        reject(err);
      }, this.loadTimeoutMs);
      timer.unref();
    });
    const loading = this.options.load(stop.signal);
    // A load given up may still fail later: that rejection is nobody's to handle.
    void loading.then(
      () => this.stopped(stop),
      () => this.stopped(stop),
    );
    return Promise.race([loading, givenUp]).finally(() => {
      clearTimeout(timer);
      if (this.loading === stop) this.loading = undefined;
    });
  }

  private stopped(load: AbortController): void {
    if (load.signal.aborted && !this.closed) this.retryLoad = true;
  }

  private report(err: unknown): void {
    try {
      this.options.onError(err instanceof Error ? err : new Error(String(err)));
    } catch {
      // A throwing error handler must not stop the watcher.
    }
  }

  // ---- fs.watch management ----

  /**
   * Opens watchers for the wanted directories (the tree's own, subdirectories included, and the
   * root's) and replaces those whose directory was swapped.
   */
  private async arm(treeDirectories: readonly string[]): Promise<void> {
    const wanted = await this.wantedDirectories(treeDirectories);
    if (this.closed) return;
    for (const [path, armed] of this.watchers) {
      if (wanted.get(path)?.ino !== armed.ino) {
        armed.watcher.close();
        this.watchers.delete(path);
      }
    }
    for (const [path, want] of wanted) {
      if (!this.watchers.has(path)) this.open(path, want);
    }
  }

  private async wantedDirectories(treeDirectories: readonly string[]): Promise<Map<string, WantedDirectory>> {
    const { root, subdirectory, watchRoot } = this.options;
    const candidates: { path: string; only?: string }[] = [];
    if (watchRoot) {
      const top = resolve(root);
      if (dirname(top) !== top) candidates.push({ path: dirname(top), only: basename(top) });
      candidates.push({ path: top }, { path: resolve(top, subdirectory) });
    }
    candidates.push({ path: this.tree.rulesDir });
    // inotify watches one directory, not its subdirectories: each walked one is watched (up to
    // a bound; beyond it the poll still sees every change within its period).
    for (const path of treeDirectories.slice(0, MAX_WATCHED_DIRECTORIES)) candidates.push({ path });
    const wanted = new Map<string, WantedDirectory>();
    for (const { path, only } of candidates) {
      const ino = await directoryInode(path);
      if (ino === undefined) continue;
      // A path listed twice (empty subdirectory) is watched once, unfiltered if either asks.
      const filter = wanted.has(path) ? undefined : only;
      wanted.set(path, { ino, ...(filter !== undefined && { only: filter }) });
    }
    return wanted;
  }

  private open(path: string, want: WantedDirectory): void {
    let watcher: FSWatcher;
    try {
      // Not persistent: watching files must never keep the process alive.
      watcher = watch(path, { persistent: false }, (_event, filename) => {
        if (want.only !== undefined && filename !== null && filename !== want.only) return;
        this.onFileEvent();
      });
    } catch {
      // Directory just vanished, or inotify limits reached: the poll still sees every change.
      return;
    }
    watcher.on('error', () => {
      watcher.close();
      if (this.watchers.get(path)?.watcher === watcher) this.watchers.delete(path);
      this.onFileEvent();
    });
    this.watchers.set(path, { watcher, ino: want.ino });
  }
}

/** inotify watches per process are a shared, limited resource (fs.inotify.max_user_watches). */
const MAX_WATCHED_DIRECTORIES = 256;

async function directoryInode(path: string): Promise<bigint | undefined> {
  try {
    const info = await stat(path, { bigint: true });
    return info.isDirectory() ? info.ino : undefined;
  } catch {
    return undefined;
  }
}
