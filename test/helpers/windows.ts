// Epoch-aligned windows in tests: a count that must be exact may not straddle a window boundary.

/** Milliseconds until the current `windowSeconds`-aligned window ends. */
export function msToWindowEnd(windowSeconds: number, now = Date.now()): number {
  const w = windowSeconds * 1000;
  return w - (now % w);
}

/**
 * Waits (only when needed) until at least `needMs` remain in the current window, so that a
 * window boundary cannot fall inside a test that counts exactly.
 */
export async function awayFromWindowEdge(windowSeconds: number, needMs: number): Promise<void> {
  const left = msToWindowEnd(windowSeconds);
  if (left < needMs) await new Promise((r) => setTimeout(r, left + 50));
}
