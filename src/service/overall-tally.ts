import type { Code } from './types';

/**
 * Adds up the counted descriptors of one request into its overall code and Retry-After. The
 * request is over its limits when a non-quota rule is, or when every quota rule is. Retry-After:
 * the request is allowed again once every non-quota rule over its limit is, and (when all quota
 * rules are over) one of the quota rules is.
 */
export class OverallTally {
  private nonQuotaOver = false;
  private quotaCount = 0;
  private quotaOver = 0;
  private retryNonQuotaMs = 0;
  private retryQuotaMs = Number.POSITIVE_INFINITY;
  private ownNonQuotaOver = false;
  private ownQuotaOver = false;

  /** `own`: the counter is the policy client's own (see PolicyEngine.ownsCounter). */
  add(quota: boolean, over: boolean, retryAfterMs: number, own = false): void {
    if (quota) {
      this.quotaCount++;
      if (over) {
        this.quotaOver++;
        this.retryQuotaMs = Math.min(this.retryQuotaMs, retryAfterMs);
        this.ownQuotaOver ||= own;
      }
    } else if (over) {
      this.nonQuotaOver = true;
      this.retryNonQuotaMs = Math.max(this.retryNonQuotaMs, retryAfterMs);
      this.ownNonQuotaOver ||= own;
    }
  }

  /** Whether a limit that denies the request (as limited() counts them) is one marked own. */
  deniedByOwn(): boolean {
    return this.ownNonQuotaOver || (this.allQuotaOver() && this.ownQuotaOver);
  }

  /** Before shadow mode; a penalty box (`boxMs` > 0) denies the whole request, also when no rule matched. */
  limited(boxMs: number): Code {
    return this.nonQuotaOver || this.allQuotaOver() || boxMs > 0 ? 'OVER_LIMIT' : 'OK';
  }

  retryAfterMs(boxMs: number): number {
    return Math.max(this.retryNonQuotaMs, this.allQuotaOver() ? this.retryQuotaMs : 0, boxMs);
  }

  private allQuotaOver(): boolean {
    return this.quotaCount > 0 && this.quotaOver === this.quotaCount;
  }
}
