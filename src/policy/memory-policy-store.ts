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

export interface MemoryPolicyStoreOptions {
  readonly now?: () => number;
  /** Clients kept at most; the least recently seen goes first (its tier falls back to normal). */
  readonly maxClients?: number;
}

/** Numbers kept per client: the state's seven, then its expiry. */
const CELLS = 8;
const EXPIRES = 7;
const NONE = -1;

/**
 * The policy model in this process, with the same expiry as the Redis keys, bounded in clients.
 * A client's state is kept as numbers in one typed array (its routes and fingerprints, when it
 * has any, as small arrays beside it), not as an object with two Sets: about 0.64 KB of heap
 * per client was 64 MB at the default 100,000 clients, and took the server to 207 MiB of RSS
 * with the image's heap limit (issue 26, finding 9); a `PolicyState` is built only for the
 * decision at hand.
 */
export class MemoryPolicyStore implements PolicyStore {
  /** Client id → its slot; Map order is least recently seen first. */
  private readonly index = new Map<string, number>();
  private readonly cells: Float64Array;
  /** Per slot, when not empty. */
  private readonly routes: (number[] | undefined)[] = [];
  private readonly fingerprints: (number[] | undefined)[] = [];
  private readonly free: number[] = [];
  private used = 0;
  private readonly now: () => number;
  private readonly maxClients: number;
  private lastSweep = 0;

  constructor(options: MemoryPolicyStoreOptions = {}) {
    this.now = options.now ?? Date.now;
    this.maxClients = options.maxClients ?? 100_000;
    // Zeroed pages become resident only as slots are used.
    this.cells = new Float64Array(this.maxClients * CELLS);
  }

  decide(policy: PolicyConfig, params: PolicyParams, client: string, input: PolicyInput): Promise<PolicyOutcome> {
    const now = this.now();
    const id = clientId(policy, client);
    let slot = this.live(id, now);
    let state: PolicyState;
    if (slot === NONE) state = newPolicyState(now);
    else {
      state = this.load(slot);
      this.index.delete(id); // re-inserted below: Map order is least recently seen first
    }
    const outcome = decide(state, params, input, now, true);
    if (slot === NONE) {
      this.makeRoom();
      slot = this.allocate();
    }
    this.save(slot, state, stateExpiresAt(state, params));
    this.index.set(id, slot);
    return Promise.resolve(outcome);
  }

  lookUp(policy: PolicyConfig, params: PolicyParams, client: string): Promise<PolicyOutcome> {
    const now = this.now();
    const slot = this.live(clientId(policy, client), now);
    // load builds a fresh state: the decision changes nothing kept.
    const state = slot === NONE ? newPolicyState(now) : this.load(slot);
    return Promise.resolve(decide(state, params, NO_INPUT, now, false));
  }

  connect(): void {
    // Nothing to open.
  }

  isReady(): boolean {
    return true;
  }

  close(): Promise<void> {
    this.index.clear();
    this.routes.length = 0;
    this.fingerprints.length = 0;
    this.free.length = 0;
    this.used = 0;
    return Promise.resolve();
  }

  /** Number of clients held (tests). */
  get size(): number {
    return this.index.size;
  }

  private live(id: string, now: number): number {
    const slot = this.index.get(id);
    if (slot === undefined) return NONE;
    if ((this.cells[slot * CELLS + EXPIRES] as number) <= now) {
      this.remove(id, slot);
      return NONE;
    }
    return slot;
  }

  private load(slot: number): PolicyState {
    const c = this.cells;
    const at = slot * CELLS;
    return {
      tier: c[at] as number,
      calm: c[at + 1] as number,
      until: c[at + 2] as number,
      window: c[at + 3] as number,
      requests: c[at + 4] as number,
      repeats: c[at + 5] as number,
      denials: c[at + 6] as number,
      routes: new Set(this.routes[slot]),
      fingerprints: new Set(this.fingerprints[slot]),
    };
  }

  private save(slot: number, s: PolicyState, expiresAt: number): void {
    const c = this.cells;
    const at = slot * CELLS;
    c[at] = s.tier;
    c[at + 1] = s.calm;
    c[at + 2] = s.until;
    c[at + 3] = s.window;
    c[at + 4] = s.requests;
    c[at + 5] = s.repeats;
    c[at + 6] = s.denials;
    c[at + EXPIRES] = expiresAt;
    this.routes[slot] = s.routes.size > 0 ? [...s.routes] : undefined;
    this.fingerprints[slot] = s.fingerprints.size > 0 ? [...s.fingerprints] : undefined;
  }

  private allocate(): number {
    return this.free.pop() ?? this.used++;
  }

  private remove(id: string, slot: number): void {
    this.index.delete(id);
    this.routes[slot] = undefined;
    this.fingerprints[slot] = undefined;
    this.free.push(slot);
  }

  private makeRoom(): void {
    if (this.index.size < this.maxClients) return;
    const now = this.now();
    // A full sweep at most once a second; in between the least recently seen client goes.
    if (now - this.lastSweep >= 1000) {
      this.lastSweep = now;
      for (const [id, slot] of this.index) if ((this.cells[slot * CELLS + EXPIRES] as number) <= now) this.remove(id, slot);
    }
    while (this.index.size >= this.maxClients) {
      const [id, slot] = this.index.entries().next().value as [string, number];
      this.remove(id, slot);
    }
  }
}

/** The client's key in the map: the identity of its Redis keys, a digest when long (as a counter's). */
function clientId(policy: PolicyConfig, client: string): string {
  const id = compactIdentity(policyIdentity(policy.domain, policy.client, client));
  // One flat string, not the pieces it was joined from (counter-table.ts flatten, the same reason).
  Number(id);
  return id;
}
