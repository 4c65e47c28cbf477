/**
 * Stops calling a backend that keeps failing, and lets one probe through now and then.
 * closed: calls go through; after `failureThreshold` consecutive failures → open.
 * open: calls are refused at once for `openMs`; then one call is let through as a probe.
 * A success anywhere closes it again.
 */
export class CircuitBreaker {
  private consecutiveFailures = 0;
  private openUntil = 0;
  private probing = false;

  constructor(
    private readonly failureThreshold = 3,
    private readonly openMs = 500,
    private readonly now: () => number = Date.now,
  ) {}

  /** True when a call may go to the backend now. */
  allow(): boolean {
    if (this.consecutiveFailures < this.failureThreshold) return true;
    if (this.now() < this.openUntil || this.probing) return false;
    this.probing = true;
    return true;
  }

  get isOpen(): boolean {
    return this.consecutiveFailures >= this.failureThreshold;
  }

  /** The call allowed as a probe was not made after all: let the next one probe. */
  cancelProbe(): void {
    this.probing = false;
  }

  success(): void {
    this.consecutiveFailures = 0;
    this.probing = false;
  }

  failure(): void {
    this.consecutiveFailures++;
    this.probing = false;
    if (this.consecutiveFailures >= this.failureThreshold) this.openUntil = this.now() + this.openMs;
  }
}

/**
 * The breaker's view of one Redis call: its outcome is told to the breaker once, however many
 * requests a merged call serves. The outcome is Redis' own (a reply, an error reply, a lost
 * connection, or REDIS_TIMEOUT), never a caller's deadline: callers that give up early must not
 * open a breaker that every caller shares.
 */
export class BreakerCall {
  private settled = false;

  constructor(private readonly breaker: CircuitBreaker) {}

  succeeded(): void {
    if (this.settled) return;
    this.settled = true;
    this.breaker.success();
  }

  /** The call failed in Redis: an error reply, a lost connection or REDIS_TIMEOUT. */
  failed(): void {
    if (this.settled) return;
    this.settled = true;
    this.breaker.failure();
  }

  /** Records the outcome of `reply` when it settles, and returns it unchanged. */
  track<T>(reply: Promise<T>): Promise<T> {
    reply.then(
      () => this.succeeded(),
      () => this.failed(),
    );
    return reply;
  }
}
