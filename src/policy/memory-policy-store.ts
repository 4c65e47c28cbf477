import type { PolicyConfig } from '../domain/policy-config';
import { compactIdentity, policyIdentity } from '../limiter/counter-key';
import {
  decide,
  newPolicyState,
  stateExpiresAt,
  type PolicyInput,
  type PolicyOutcome,
  type PolicyParams,
  type PolicyState,
} from './policy-model';
import { NO_INPUT, type PolicyStore } from './policy-store';

interface Entry {
  readonly state: PolicyState;
  expiresAt: number;
}

export interface MemoryPolicyStoreOptions {
  readonly now?: () => number;
  /** Clients kept at most; the least recently seen goes first (its tier falls back to normal). */
  readonly maxClients?: number;
}

/** The policy model in this process, with the same expiry as the Redis keys, bounded in clients. */
export class MemoryPolicyStore implements PolicyStore {
  private readonly clients = new Map<string, Entry>();
  private readonly now: () => number;
  private readonly maxClients: number;
  private lastSweep = 0;

  constructor(options: MemoryPolicyStoreOptions = {}) {
    this.now = options.now ?? Date.now;
    this.maxClients = options.maxClients ?? 100_000;
  }

  decide(policy: PolicyConfig, params: PolicyParams, client: string, input: PolicyInput): Promise<PolicyOutcome> {
    const now = this.now();
    const id = clientId(policy, client);
    let entry = this.live(id, now);
    if (entry === undefined) entry = { state: newPolicyState(now), expiresAt: 0 };
    else this.clients.delete(id); // re-inserted below: Map order is least recently seen first
    const outcome = decide(entry.state, params, input, now, true);
    entry.expiresAt = stateExpiresAt(entry.state, params);
    this.makeRoom();
    this.clients.set(id, entry);
    return Promise.resolve(outcome);
  }

  lookUp(policy: PolicyConfig, params: PolicyParams, client: string): Promise<PolicyOutcome> {
    const now = this.now();
    const entry = this.live(clientId(policy, client), now);
    const s = entry?.state;
    const copy: PolicyState = s ? { ...s, routes: new Set(s.routes), fingerprints: new Set(s.fingerprints) } : newPolicyState(now);
    return Promise.resolve(decide(copy, params, NO_INPUT, now, false));
  }

  connect(): void {
    // Nothing to open.
  }

  isReady(): boolean {
    return true;
  }

  close(): Promise<void> {
    this.clients.clear();
    return Promise.resolve();
  }

  /** Number of clients held (tests). */
  get size(): number {
    return this.clients.size;
  }

  private live(id: string, now: number): Entry | undefined {
    const entry = this.clients.get(id);
    if (entry !== undefined && entry.expiresAt <= now) {
      this.clients.delete(id);
      return undefined;
    }
    return entry;
  }

  private makeRoom(): void {
    if (this.clients.size < this.maxClients) return;
    const now = this.now();
    // A full sweep at most once a second; in between the least recently seen client goes.
    if (now - this.lastSweep >= 1000) {
      this.lastSweep = now;
      for (const [id, entry] of this.clients) if (entry.expiresAt <= now) this.clients.delete(id);
    }
    while (this.clients.size >= this.maxClients) {
      const oldest = this.clients.keys().next().value as string;
      this.clients.delete(oldest);
    }
  }
}

/** The client's key in the map: the identity of its Redis keys, a digest when long (as a counter's). */
function clientId(policy: PolicyConfig, client: string): string {
  return compactIdentity(policyIdentity(policy.domain, policy.client, client));
}
