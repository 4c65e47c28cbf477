import type { CheckOptions, LimitCheck, LimitResult, Limiter } from '../limiter';

/**
 * REDIS_KEY_LAYOUT=reference with REDIS_KEY_LAYOUT_UNTIL (issue 30): a request is counted in the
 * shared layout (the reference's keys, by `shared`) until `atMs` by this pod's clock, and in
 * floodgate's own keys from then on (by `own`, which carries each window's count over first,
 * ReferenceCarryOver). Every pod set so switches at the same moment: none counts a window in
 * the reference's key while another counts it in its own (a rolling update to the own layout
 * would let them, for as long as it runs), so leaving the shared layout is exact, to within the
 * pods' clock offsets.
 */
export class LayoutSwitch implements Limiter {
  constructor(
    private readonly shared: Limiter,
    private readonly own: Limiter,
    private readonly atMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  check(checks: readonly LimitCheck[], options: CheckOptions): Promise<LimitResult[]> {
    return (this.now() < this.atMs ? this.shared : this.own).check(checks, options);
  }

  isHealthy(): boolean {
    return this.shared.isHealthy();
  }

  /** `own` wraps `shared`'s Redis limiter (OwnKeysOnly): closed once, through it. */
  close(): Promise<void> {
    return this.shared.close();
  }
}

/**
 * The Redis limiter of the shared layout, made to count every limit in floodgate's own keys: a
 * check's `shareable` mark (which sends it to the reference's key) is taken off. One object more
 * per shareable check; REDIS_KEY_LAYOUT=floodgate, set once every pod has switched, costs none.
 */
export class OwnKeysOnly implements Limiter {
  constructor(private readonly inner: Limiter) {}

  check(checks: readonly LimitCheck[], options: CheckOptions): Promise<LimitResult[]> {
    return this.inner.check(checks.map(unshared), options);
  }

  isHealthy(): boolean {
    return this.inner.isHealthy();
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}

function unshared(check: LimitCheck): LimitCheck {
  if (check.spec.shareable !== true) return check;
  // Every other field of the spec kept as it is, whatever LimitSpec gains later.
  // eslint-disable-next-line @typescript-eslint/no-unused-vars -- the mark is what is taken off
  const { shareable, ...spec } = check.spec;
  return { ...check, spec };
}
