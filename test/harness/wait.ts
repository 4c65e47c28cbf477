/** Options of {@link waitUntil}. */
export interface WaitOptions {
  /** Give up after this many milliseconds. */
  readonly timeoutMs: number;
  /** Pause between attempts. */
  readonly intervalMs?: number;
  /** Extra text for the timeout error, e.g. the tail of a server log. Called only on timeout. */
  readonly diagnostics?: () => string;
}

/**
 * Polls `probe` until it returns a value other than `undefined`/`false`, or throws a clear error
 * when the deadline passes. A probe that throws counts as "not yet"; its last error is reported.
 */
export async function waitUntil<T>(
  what: string,
  probe: () => Promise<T | undefined | false> | T | undefined | false,
  options: WaitOptions,
): Promise<T> {
  const deadline = Date.now() + options.timeoutMs;
  const interval = options.intervalMs ?? 50;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined && value !== false) return value;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() >= deadline) break;
    await sleep(Math.min(interval, Math.max(0, deadline - Date.now())));
  }
  let message = `timed out after ${options.timeoutMs} ms waiting for ${what}`;
  if (lastError !== undefined) message += `\nlast error: ${errorText(lastError)}`;
  const extra = options.diagnostics?.();
  if (extra) message += `\n${extra}`;
  throw new Error(message);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * Polls `condition` every 10 ms until it holds; resolves with the milliseconds that took, or
 * fails after `timeoutMs` naming `what`. The one polling loop of the tests.
 */
export async function within(timeoutMs: number, condition: () => boolean | Promise<boolean>, what = 'the condition'): Promise<number> {
  const started = Date.now();
  await waitUntil(what, condition, { timeoutMs, intervalMs: 10 });
  return Date.now() - started;
}

/**
 * The control for a bound on this process' own timing: a loop of 10 ms timers, run beside the
 * code under test, that records how late they fired. A busy machine delays the code's timers
 * and answers as much; a bound is the code's own plus this lateness. `stop()` ends the loop and
 * resolves with the worst lateness seen, in ms.
 */
export function timerLateness(): { stop(): Promise<number> } {
  let worst = 0;
  let running = true;
  const loop = (async () => {
    for (let i = 0; i < 100_000 && running; i++) {
      const t0 = performance.now();
      await sleep(10);
      worst = Math.max(worst, performance.now() - t0 - 10);
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return worst;
    },
  };
}
