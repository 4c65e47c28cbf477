import type { ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';

// Last line of defence against orphans: whatever a crashed or interrupted test run leaves alive is
// SIGKILLed when this process exits. Normal teardown goes through stop() and leaves nothing here.
const children = new Set<ChildProcess>();
const dirs = new Set<string>();
let hooksInstalled = false;

function isAlive(child: ChildProcess): boolean {
  return child.exitCode === null && child.signalCode === null;
}

function killEverything(): void {
  for (const child of children) {
    if (isAlive(child) && child.pid !== undefined) {
      try {
        process.kill(child.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }
  children.clear();
  for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
  dirs.clear();
}

function onSignal(signal: NodeJS.Signals): void {
  killEverything();
  // Our once-listener is gone now; re-raise so the default action (or other listeners) still apply.
  if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
}

function installHooks(): void {
  if (hooksInstalled) return;
  hooksInstalled = true;
  process.on('exit', killEverything);
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.once(signal, onSignal);
}

/** Tracks a child process until it exits. */
export function trackChild(child: ChildProcess): void {
  installHooks();
  children.add(child);
  child.once('exit', () => children.delete(child));
}

/** Tracks a temp dir until {@link releaseDir}. */
export function trackDir(dir: string): void {
  installHooks();
  dirs.add(dir);
}

export function releaseDir(dir: string): void {
  dirs.delete(dir);
}

/** Number of tracked children still running (for tests of the harness itself). */
export function liveChildCount(): number {
  let n = 0;
  for (const child of children) if (isAlive(child)) n++;
  return n;
}
