import type { Logger } from '../base/log';
import { loadSettings, type Settings } from './settings';
import type { Env } from './parse';
import { REFERENCE_VARIABLES } from './reference';

/** Shorter names are left alone: HOME, PATH, PWD are one edit from many words. */
const MIN_NAME_LENGTH = 6;
const MAX_EDITS = 2;
const SETTING_NAME = /^[A-Z][A-Z0-9_]*$/;

/**
 * Warns, once at start-up, about what the environment probably did not mean: a variable a typo
 * away from a setting (REDIS_ULR would otherwise start the memory backend without a word), and
 * the memory backend chosen only because no Redis is configured (each replica then counts alone),
 * and REDIS_KEY_LAYOUT=reference with the memory backend (nothing is shared then).
 */
export function reportSettingsDoubts(env: Env, settings: Settings | undefined, logger: Logger): void {
  const known = knownNames(env);
  for (const name of Object.keys(env)) {
    if (known.has(name) || name.length < MIN_NAME_LENGTH || !SETTING_NAME.test(name)) continue;
    const near = nearest(name, known);
    if (near !== undefined) logger.warn(`${name} is not a setting; did you mean ${near}?`);
  }
  if (settings?.backendType === 'memory' && !env.BACKEND_TYPE)
    logger.warn('no REDIS_URL is set, so the memory backend counts: each replica counts alone (limits apply per replica, not across replicas)');
  if (settings?.redisKeyLayout === 'reference' && settings.backendType === 'memory')
    logger.warn(
      'REDIS_KEY_LAYOUT=reference has no effect with the memory backend: nothing counts in Redis, so nothing is shared with the reference',
    );
}

/**
 * The reference's variables and every name loadSettings reads, with the defaults and with this
 * environment's branches (up to the error that stops it when the environment is invalid: a typo
 * is often its cause).
 */
function knownNames(env: Env): Set<string> {
  const known = new Set(REFERENCE_VARIABLES.map((v) => v.name));
  for (const source of [{}, env]) {
    const recording = new Proxy(source, {
      get(target, prop, receiver) {
        if (typeof prop === 'string') known.add(prop);
        return Reflect.get(target, prop, receiver) as unknown;
      },
    });
    try {
      loadSettings(recording);
    } catch {
      // The caller reports the error itself; the names read until then are known.
    }
  }
  return known;
}

function nearest(name: string, known: ReadonlySet<string>): string | undefined {
  let best: string | undefined;
  let bestEdits = MAX_EDITS + 1;
  for (const candidate of known) {
    if (Math.abs(candidate.length - name.length) >= bestEdits) continue;
    const edits = editDistance(name, candidate, bestEdits);
    if (edits < bestEdits) [best, bestEdits] = [candidate, edits];
  }
  return best;
}

/** Optimal string alignment distance (a swap of two neighbours is one edit), cut off at `limit`. */
function editDistance(a: string, b: string, limit: number): number {
  let before = new Array<number>(b.length + 1).fill(0);
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    let rowMin = i;
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, before[j - 2]! + 1);
      current.push(d);
      rowMin = Math.min(rowMin, d);
    }
    if (rowMin >= limit) return limit;
    [before, previous] = [previous, current];
  }
  return previous[b.length]!;
}
