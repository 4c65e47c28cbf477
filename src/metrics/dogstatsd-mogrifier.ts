/**
 * DogStatsD mogrifiers, as the reference's USE_DOG_STATSD_MOGRIFIERS: each turns a stat name that
 * its pattern matches into another name plus tags, `$0`, `$1`... standing for the match groups.
 * The first mogrifier whose pattern matches wins; a name none matches is sent unchanged.
 */
export interface Mogrifier {
  /** The name in USE_DOG_STATSD_MOGRIFIERS (for messages). */
  readonly id: string;
  readonly pattern: RegExp;
  readonly name: string;
  /** Tag name and value template, in the order given. */
  readonly tags: readonly (readonly [string, string])[];
}

const VARIABLE = /\$(\d+)/g;

function fill(template: string, match: RegExpExecArray): string {
  // As Go's FindStringSubmatch: a group that took no part is empty; a number past the groups stays as written.
  return template.replace(VARIABLE, (whole, index: string) => (Number(index) < match.length ? (match[Number(index)] ?? '') : whole));
}

/** The name to send and the `key:value` tags the first matching mogrifier adds. */
export function mogrify(mogrifiers: readonly Mogrifier[], name: string): { name: string; tags: string[] } {
  for (const m of mogrifiers) {
    const match = m.pattern.exec(name);
    if (match === null) continue;
    return { name: fill(m.name, match), tags: m.tags.map(([key, value]) => `${key}:${fill(value, match)}`) };
  }
  return { name, tags: [] };
}
