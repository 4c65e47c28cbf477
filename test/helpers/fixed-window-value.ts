// lua/fixed_window.lua stores "<window start>:<count>:<count of the window before>" per counter.

/** The count of the latest window in a stored fixed-window value; null for a missing key. */
export function fixedWindowCount(value: unknown): number | null {
  if (value === null || value === undefined) return null;
  const text = Buffer.isBuffer(value) ? value.toString() : value;
  const m = typeof text === 'string' ? /^\d+:(\d+):\d+$/.exec(text) : null;
  if (m === null) throw new Error(`not a fixed-window value: ${JSON.stringify(text)}`);
  return Number(m[1]);
}
