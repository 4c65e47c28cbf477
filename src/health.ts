import { EventEmitter } from 'node:events';

export interface HealthInputs {
  /** False while the counter backend is unreachable as a whole. */
  readonly backendHealthy: () => boolean;
  /** False until rules loaded, when HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED asks for that. */
  readonly rulesReady: () => boolean;
  /** How often the inputs are re-read to notice a change, in ms. */
  readonly pollMs?: number;
}

/**
 * One answer to "is this instance healthy?", shared by /healthcheck and grpc.health.v1 so they
 * never disagree. Emits 'change' with the new value when it flips.
 */
export class HealthState extends EventEmitter {
  private shuttingDown = false;
  private last: boolean;
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly inputs: HealthInputs) {
    super();
    this.last = this.compute();
    this.timer = setInterval(() => this.refresh(), inputs.pollMs ?? 250);
    this.timer.unref();
  }

  isServing(): boolean {
    this.refresh();
    return this.last;
  }

  /** After SIGTERM: NOT_SERVING for good, so load balancers drain this instance. */
  markShuttingDown(): void {
    this.shuttingDown = true;
    this.refresh();
  }

  close(): void {
    clearInterval(this.timer);
    this.removeAllListeners();
  }

  private compute(): boolean {
    return !this.shuttingDown && this.inputs.rulesReady() && this.inputs.backendHealthy();
  }

  private refresh(): void {
    const now = this.compute();
    if (now !== this.last) {
      this.last = now;
      this.emit('change', now);
    }
  }
}
