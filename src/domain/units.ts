/** Time units of rate limits, as the rule files and Envoy name them. */
export type Unit = 'SECOND' | 'MINUTE' | 'HOUR' | 'DAY' | 'WEEK' | 'MONTH' | 'YEAR';

/** Seconds per unit as Envoy counts them (MONTH = 30 days, YEAR = 365 days). */
export const UNIT_SECONDS: Readonly<Record<Unit, number>> = Object.freeze({
  SECOND: 1,
  MINUTE: 60,
  HOUR: 3600,
  DAY: 86400,
  WEEK: 604800,
  MONTH: 2592000,
  YEAR: 31536000,
});

const UNIT_BY_LOWER: ReadonlyMap<string, Unit> = new Map((Object.keys(UNIT_SECONDS) as Unit[]).map((u) => [u.toLowerCase(), u]));

/** Parses a unit name case-insensitively; undefined when it is not one. */
export function parseUnit(name: string): Unit | undefined {
  return UNIT_BY_LOWER.get(name.toLowerCase());
}
