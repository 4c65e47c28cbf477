/** XDS_CLIENT_BACKOFF_*: the wait before re-subscribing after the stream to the management server ended. */
export interface XdsBackoffSettings {
  readonly initialMs: number;
  readonly maxMs: number;
  /** XDS_CLIENT_BACKOFF_RANDOM_FACTOR: the growth factor per attempt, as the reference uses it. */
  readonly factor: number;
  readonly jitter: boolean;
}

/**
 * The reference's backoff (jpillora/backoff with Min, Max, Factor and Jitter from the settings),
 * with its arithmetic: wait = initial × factor^attempt, with jitter a uniform pick between
 * initial and that, clamped to [initial, max]. The reference passes the *random factor* (0.5 by
 * default) as the growth factor, so with the defaults every retry waits the initial interval;
 * a factor above 1 makes the waits grow. Unlike the reference, a snapshot received resets the
 * attempt count, so a server that comes back after one outage is not waited for longer next time.
 */
export class XdsBackoff {
  private attempt = 0;

  constructor(
    private readonly settings: XdsBackoffSettings,
    private readonly random: () => number = Math.random,
  ) {}

  /** The next wait in ms; each call is one more attempt. */
  next(): number {
    // Zero means the library's default, as in the reference: 100 ms, 10 s, factor 2.
    const initialMs = this.settings.initialMs > 0 ? this.settings.initialMs : 100;
    const maxMs = this.settings.maxMs > 0 ? this.settings.maxMs : 10_000;
    const factor = this.settings.factor > 0 ? this.settings.factor : 2;
    const attempt = this.attempt++;
    if (initialMs >= maxMs) return maxMs;
    let wait = initialMs * Math.pow(factor, attempt);
    if (this.settings.jitter) wait = this.random() * (wait - initialMs) + initialMs;
    if (!Number.isFinite(wait) || wait > maxMs) return maxMs;
    return Math.max(initialMs, wait);
  }

  reset(): void {
    this.attempt = 0;
  }
}
