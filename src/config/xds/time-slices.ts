import { setImmediate as nextTurn } from 'node:timers/promises';

/**
 * A slice of work this long, plus the one step that ends it, stays well under the ~10 ms an
 * ordinary call may wait for the event loop.
 */
export const SLICE_MS = 4;

/**
 * Runs a generator's steps, giving the event loop a turn (I/O, timers, calls in flight)
 * whenever a slice has run `sliceMs`. Each step must itself be short.
 */
export async function runInSlices<T>(steps: Generator<void, T>, sliceMs = SLICE_MS): Promise<T> {
  let sliceStart = performance.now();
  for (;;) {
    const step = steps.next();
    if (step.done) return step.value;
    if (performance.now() - sliceStart >= sliceMs) {
      await nextTurn();
      sliceStart = performance.now();
    }
  }
}

/** Runs a generator's steps in one go. */
export function runToEnd<T>(steps: Generator<void, T>): T {
  for (;;) {
    const step = steps.next();
    if (step.done) return step.value;
  }
}
