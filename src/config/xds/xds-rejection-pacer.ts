/**
 * At most this often a NACK: a management server answers each NACK with a snapshot at once, so
 * this bounds the exchange to a few small messages a second (a fixed snapshot still arrives
 * promptly, as ACKs are not paced).
 */
export const NACK_INTERVAL_MS = 250;

/** At most one rejection a second is logged at ERROR; the next one logged says how many were not. */
export const LOG_INTERVAL_MS = 1000;

/**
 * Snapshots already rejected, by content, so that one sent again is NACKed again without being
 * compiled: a few, so that alternating bad snapshots are not compiled over and over either.
 */
const REMEMBERED_REJECTIONS = 8;

/** The xDS client's memory of rejected snapshots and its pacing of NACKs and ERROR logs. */
export class RejectionPacer {
  private readonly rejections = new Map<string, string>();
  private lastNackAt = Number.NEGATIVE_INFINITY;
  private lastLogAt = Number.NEGATIVE_INFINITY;
  private unlogged = 0;

  constructor(private readonly now: () => number = () => performance.now()) {}

  /** The message a snapshot was rejected with, if it was. */
  rejected(key: string): string | undefined {
    return this.rejections.get(key);
  }

  /** Remembers a rejection (forgetting the oldest beyond a few); says whether to log it now. */
  reject(key: string, message: string): { readonly log: boolean; readonly unlogged: number } {
    this.rejections.delete(key);
    this.rejections.set(key, message);
    if (this.rejections.size > REMEMBERED_REJECTIONS) this.rejections.delete(this.rejections.keys().next().value as string);
    const now = this.now();
    if (now - this.lastLogAt < LOG_INTERVAL_MS) {
      this.unlogged++;
      return { log: false, unlogged: this.unlogged };
    }
    const report = { log: true, unlogged: this.unlogged };
    this.lastLogAt = now;
    this.unlogged = 0;
    return report;
  }

  /** A snapshot was accepted: a rejected one that comes back after it is reported afresh. */
  accepted(): void {
    this.rejections.clear();
  }

  /** How long the next NACK must wait. */
  nackDelayMs(): number {
    return Math.max(0, this.lastNackAt + NACK_INTERVAL_MS - this.now());
  }

  nackSent(): void {
    this.lastNackAt = this.now();
  }
}
