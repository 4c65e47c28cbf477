import { EventEmitter } from 'node:events';

export interface HealthInputs {
  /** False while the counter backend is unreachable as a whole. */
  readonly backendHealthy: () => boolean;
  /**
   * Whether a backend outage makes the instance unhealthy (REDIS_HEALTH_CHECK_ACTIVE_CONNECTION,
   * off by default as in the reference: a liveness probe on /healthcheck would otherwise restart
   * every pod during a Redis outage, while the failure mode answers calls meanwhile).
   */
  readonly backendCountsForHealth: boolean;
  /** False until rules loaded, when HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED asks for that. */
  readonly rulesReady: () => boolean;
  /** How often the inputs are re-read to notice a change, in ms. */
  readonly pollMs?: number;
}

interface Snapshot {
  /** Everything but the backend: not shutting down, rules ready. gRPC service `""` reports this. */
  readonly process: boolean;
  /** The backend answers. */
  readonly backend: boolean;
}

/**
 * One answer to "is this instance healthy?", shared by /healthcheck and grpc.health.v1 so they
 * never disagree. Emits 'change' when any part of it flips (the backend included, for its gauge).
 */
export class HealthState extends EventEmitter {
  private shuttingDown = false;
  private last: Snapshot;
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly inputs: HealthInputs) {
    super();
    this.last = this.compute();
    this.timer = setInterval(() => this.refresh(), inputs.pollMs ?? 250);
    this.timer.unref();
  }

  /** /healthcheck and gRPC service `ratelimit`: the backend counts when the setting says so. */
  isServing(): boolean {
    this.refresh();
    return this.last.process && (this.last.backend || !this.inputs.backendCountsForHealth);
  }

  /** gRPC service `""`: the process itself, never the backend (as grpc-go's health server in the reference). */
  isProcessServing(): boolean {
    this.refresh();
    return this.last.process;
  }

  isBackendHealthy(): boolean {
    this.refresh();
    return this.last.backend;
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

  private compute(): Snapshot {
    return { process: !this.shuttingDown && this.inputs.rulesReady(), backend: this.inputs.backendHealthy() };
  }

  private refresh(): void {
    const now = this.compute();
    if (now.process !== this.last.process || now.backend !== this.last.backend) {
      this.last = now;
      this.emit('change');
    }
  }
}
