/**
 * Samples of a Prometheus text exposition, keyed `name{a="x",b="y"}` with labels sorted and empty
 * labels dropped (Prometheus treats an empty label as an absent one).
 */
export function parseExposition(text: string): Map<string, number> {
  const samples = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) throw new Error(`not a sample line: ${line}`);
    const labels = [...(m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)]
      .filter((l) => l[2] !== '')
      .map((l) => `${l[1]}="${l[2]}"`)
      .sort();
    samples.set(`${m[1]}${labels.length > 0 ? `{${labels.join(',')}}` : ''}`, Number(m[3]));
  }
  return samples;
}

/** The samples whose name starts with `prefix`, without those that are 0. */
export function nonZero(samples: Map<string, number>, prefix: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [key, value] of samples) if (key.startsWith(prefix) && value !== 0) out[key] = value;
  return out;
}
