import type { PolicyConfig } from '../domain/policy-config';
import type { PolicyInput, PolicyOutcome, PolicyParams } from './policy-model';

/** Where policy state lives: in memory or in Redis, one atomic decision per call. */
export interface PolicyStore {
  /** Counts the request and decides the client's tier. Rejects when no answer by `deadline`. */
  decide(policy: PolicyConfig, params: PolicyParams, client: string, input: PolicyInput, deadline: number): Promise<PolicyOutcome>;
  /** The client's current signals and tier; changes nothing. */
  lookUp(policy: PolicyConfig, params: PolicyParams, client: string, deadline: number): Promise<PolicyOutcome>;
  /** Opens the backend's connection if it is not open yet. */
  connect(): void;
  /** False until the backend is connected (the app waits for it, bounded, before serving). */
  isReady(): boolean;
  close(): Promise<void>;
}

export const NO_INPUT: PolicyInput = Object.freeze({ routeHash: 0, fingerprintHash: 0, denials: 0 });
