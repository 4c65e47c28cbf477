import type { LimitCheck, LimitResult } from '../limiter';
import { fixedWindowResult } from './algorithm-scripts';
import { withDeadline } from './stop-ordering';

/**
 * One STOP-mode request of fixed windows only (counters of their own and lists of fixed windows)
 * whose counters live on several Redis servers, as a batch of them decides it in this process.
 */
export interface FixedWindowStopRequest {
  readonly checks: readonly LimitCheck[];
  /** Per check: its window's declared key (the counter's identity in Redis). */
  readonly keys: readonly string[];
  /** Per check: 0 for a counter of its own, p >= 1 for a member of the request's list p (consecutive). */
  readonly parts: readonly number[];
  /** Per check: the ms until its window ends, from the look. */
  readonly resetMs: readonly number[];
}

/**
 * Decides `request` on `counts` (declared key → the window's count), exactly as
 * lua/stop_request.lua decides a unit of fixed windows, and leaves in `counts` what it charged:
 * every counter looked at first; when none denies, all are charged (each list all or nothing,
 * judged again); else only the counters of their own that were over are charged, in order, and
 * the others answered with the count the charges before them left (lists with their look).
 * Several requests decided in turn on one `counts` are decided as one after another in Redis.
 */
export function decideFixedWindowStop(request: FixedWindowStopRequest, counts: Map<string, number>): FixedWindowStopDecision {
  const unit = new Unit(request, counts);
  const n = request.checks.length;
  const results = new Array<LimitResult>(n);
  const over = new Array<boolean>(n);
  let anyDenied = false;
  for (let i = 0; i < n; i++) {
    const o = unit.over(i);
    over[i] = o && request.parts[i] === 0;
    results[i] = unit.answer(i, o);
    if (o) anyDenied = true;
  }
  if (!anyDenied) {
    unit.chargeAll(results);
    return { results, admitted: true, over };
  }
  if (over.includes(true)) unit.chargeOver(results, over);
  return { results, admitted: false, over };
}

/** One request's counters on the batch's counts. */
class Unit {
  constructor(
    private readonly request: FixedWindowStopRequest,
    private readonly counts: Map<string, number>,
  ) {}

  count(i: number): number {
    return this.counts.get(this.request.keys[i] as string) ?? 0;
  }

  over(i: number): boolean {
    const check = this.request.checks[i] as LimitCheck;
    return this.count(i) + check.hits > check.spec.limit;
  }

  answer(i: number, denied: boolean): LimitResult {
    return fixedWindowResult(this.count(i), this.request.resetMs[i] as number, (this.request.checks[i] as LimitCheck).spec.limit, denied);
  }

  /** Counted with its hits; answered as a fixed window counted in STOP mode (over when its count is). */
  charge(i: number): LimitResult {
    const check = this.request.checks[i] as LimitCheck;
    this.counts.set(this.request.keys[i] as string, this.count(i) + check.hits);
    return this.answer(i, this.count(i) > check.spec.limit);
  }

  /** Nothing denied: every counter of its own charged, each list all or nothing (judged again). */
  chargeAll(results: LimitResult[]): void {
    const { parts } = this.request;
    for (let i = 0; i < parts.length; i++) {
      if (parts[i] === 0) {
        results[i] = this.charge(i);
        continue;
      }
      let end = i;
      while (end + 1 < parts.length && parts[end + 1] === parts[i]) end++;
      let admitted = true;
      for (let j = i; j <= end; j++) if (this.over(j)) admitted = false;
      for (let j = i; j <= end; j++) results[j] = admitted ? this.charge(j) : this.answer(j, this.over(j));
      i = end;
    }
  }

  /** Refused: the over counters of their own charged, in order; the others of their own answered with the count left. */
  chargeOver(results: LimitResult[], over: readonly boolean[]): void {
    const { parts, checks } = this.request;
    for (let i = 0; i < parts.length; i++) {
      if (parts[i] !== 0) continue;
      results[i] = over[i] === true ? this.charge(i) : this.answer(i, this.count(i) > (checks[i] as LimitCheck).spec.limit);
    }
  }
}

/** decideFixedWindowStop's answer: each check's result, whether nothing denied (all charged), and which counters of their own were over (charged when not admitted). */
export interface FixedWindowStopDecision {
  readonly results: LimitResult[];
  readonly admitted: boolean;
  readonly over: readonly boolean[];
}

/** A request waiting for its batch: its checks, keys and lists, and how it looks at and charges its counters. */
export interface FixedWindowStopWaiter {
  readonly request: Omit<FixedWindowStopRequest, 'resetMs'>;
  /** Every declared key of the request, for the order per counter. */
  readonly orderKeys: readonly string[];
  /** Epoch ms: the request is refused with DeadlineExceededError if its batch has not answered by then. */
  readonly deadline: number;
  /** Its look, nothing charged (merged with the batch's others per node). */
  look(): Promise<LimitResult[]>;
  /**
   * Charges what `decision` charged, each counter's call as STOP mode charges it on its own (a
   * call re-judges on Redis' count, so that another process' charges since the look are seen),
   * and answers: the decision's results, with those of the calls made.
   */
  charge(decision: FixedWindowStopDecision): Promise<LimitResult[]>;
}

interface Waiting extends FixedWindowStopWaiter {
  readonly resolve: (results: LimitResult[]) => void;
  readonly reject: (err: unknown) => void;
}

/**
 * STOP-mode requests of fixed windows whose counters live on several Redis servers, decided in
 * batches (issue 27): the requests that arrive in one turn of the event loop run alone on their
 * counters in this process (StopOrdering), look at them (merged per node), are decided one after
 * another here on the looked counts (decideFixedWindowStop), and then charge what they decided,
 * in that order (merged per node). Serializable within the process at about two script calls per
 * node a batch, instead of a look and a charge per request, one request at a time.
 */
export class FixedWindowStopBatches {
  private waiting: Waiting[] = [];

  constructor(private readonly ordering: { exclusive<T>(keys: readonly string[], deadline: number, run: () => Promise<T>): Promise<T> }) {}

  join(waiter: FixedWindowStopWaiter): Promise<LimitResult[]> {
    const answered = new Promise<LimitResult[]>((resolve, reject) => {
      if (this.waiting.length === 0) setImmediate(() => this.flush());
      this.waiting.push({ ...waiter, look: () => waiter.look(), charge: (d) => waiter.charge(d), resolve, reject });
    });
    return withDeadline(answered, waiter.deadline);
  }

  private flush(): void {
    const batch = this.waiting;
    this.waiting = [];
    const keys = new Set<string>();
    for (const w of batch) for (const k of w.orderKeys) keys.add(k);
    // Each request's wait is bounded by its own deadline (join); the batch's by the latest.
    const latest = Math.max(...batch.map((w) => w.deadline));
    this.ordering
      .exclusive([...keys], latest, () => this.run(batch))
      .catch((err: unknown) => {
        for (const w of batch) w.reject(err);
      });
  }

  private async run(batch: readonly Waiting[]): Promise<void> {
    const looks = await Promise.allSettled(batch.map((w) => w.look()));
    // The counts as the looks found them, then as each request in turn leaves them.
    const counts = new Map<string, number>();
    const charges: Promise<void>[] = [];
    batch.forEach((w, b) => {
      const looked = looks[b] as PromiseSettledResult<LimitResult[]>;
      if (looked.status === 'rejected') return w.reject(looked.reason);
      w.request.keys.forEach((key, i) => {
        if (!counts.has(key)) counts.set(key, (looked.value[i] as LimitResult).used);
      });
      const decision = decideFixedWindowStop({ ...w.request, resetMs: looked.value.map((r) => r.resetMs) }, counts);
      // Sent in this order, merged per node: each call charges in the order decided.
      charges.push(w.charge(decision).then(w.resolve, w.reject));
    });
    await Promise.all(charges);
  }
}
