import { BackendUnavailableError, DeadlineExceededError } from '../base/errors';
import { CircuitBreaker } from '../limiter/redis/circuit-breaker';
import { policyKeys } from '../limiter/counter-key';
import { loadLuaScript } from '../limiter/redis/lua-script';
import { isClientReady, type RedisClient } from '../limiter/redis/redis-client';
import type { PolicyConfig } from '../domain/policy-config';
import type { PolicyInput, PolicyOutcome, PolicyParams } from './policy-model';
import { NO_INPUT, type PolicyStore } from './policy-store';

export interface RedisPolicyStoreOptions {
  /**
   * The connection, or how to open it: then it is opened by connect(), or by the first
   * decision (which takes the normal tier while the connection comes up), so a deployment
   * without policies holds no connection for them.
   */
  readonly client: RedisClient | (() => RedisClient);
  readonly keyPrefix: string;
  /** Test hook: pins the script's clock (epoch ms) instead of Redis TIME. */
  readonly pinnedNow?: () => number;
}

/** One call of lua/policy.lua: mode 0 counts and decides, 1 only looks up. */
interface ScriptCall {
  readonly mode: 0 | 1;
  readonly policy: PolicyConfig;
  readonly params: PolicyParams;
  readonly client: string;
  readonly input: PolicyInput;
  readonly deadline: number;
}

/**
 * Policy state in Redis: one call of lua/policy.lua per decision, on the client's three keys.
 * A Redis that keeps failing, or leaves calls unanswered past REDIS_TIMEOUT, opens a circuit:
 * decisions then fail at once (and the engine answers with the normal tier) instead of each
 * waiting out its budget. Callers that give up sooner are not Redis failing.
 */
export class RedisPolicyStore implements PolicyStore {
  private readonly script = loadLuaScript('policy');
  private breaker = new CircuitBreaker();
  private client: RedisClient | undefined;

  constructor(private readonly options: RedisPolicyStoreOptions) {
    if (typeof options.client !== 'function') this.use(options.client);
  }

  connect(): void {
    if (this.client === undefined && typeof this.options.client === 'function') this.use(this.options.client());
  }

  private use(client: RedisClient): RedisClient {
    this.client = client;
    // A (re)connected client is worth trying at once.
    client.on('ready', () => (this.breaker = new CircuitBreaker()));
    return client;
  }

  decide(policy: PolicyConfig, params: PolicyParams, client: string, input: PolicyInput, deadline: number): Promise<PolicyOutcome> {
    return this.run({ mode: 0, policy, params, client, input, deadline });
  }

  lookUp(policy: PolicyConfig, params: PolicyParams, client: string, deadline: number): Promise<PolicyOutcome> {
    return this.run({ mode: 1, policy, params, client, input: NO_INPUT, deadline });
  }

  isReady(): boolean {
    return this.client !== undefined && isClientReady(this.client);
  }

  async close(): Promise<void> {
    const c = this.client;
    if (c !== undefined) await c.quit().catch(() => c.disconnect());
  }

  private async run({ mode, policy, params: p, client, input, deadline }: ScriptCall): Promise<PolicyOutcome> {
    const keys = policyKeys(this.options.keyPrefix, policy.domain, policy.client, client);
    const args: number[] = [
      mode,
      p.windowMs,
      p.weightRequests,
      p.weightRepeats,
      p.weightRoutes,
      p.weightDenials,
      p.elevatedAt,
      p.suspiciousAt,
      p.blockedAt,
      p.blockedMs,
      p.quietMs,
      p.routeCap,
      p.fingerprintCap,
      input.routeHash,
      input.fingerprintHash,
      input.denials,
    ];
    if (this.options.pinnedNow) args.push(this.options.pinnedNow());
    this.connect();
    // No time left: no call, and nothing for the breaker (the caller gave up, not Redis).
    const budget = deadline - Date.now();
    if (budget <= 0) throw new DeadlineExceededError('no time left for the policy');
    const breaker = this.breaker;
    if (!breaker.allow()) throw new BackendUnavailableError('redis (policy) is unavailable (circuit open)');
    const reply = this.script.run(this.client as RedisClient, keys, args);
    // The breaker hears Redis' own outcome whenever it comes: a connection error, an error
    // reply, or no reply within REDIS_TIMEOUT (the client's command timeout). A caller that
    // stops waiting first is no failure of Redis: a late reply is a success.
    reply.then(
      () => breaker.success(),
      () => breaker.failure(),
    );
    const r = await withDeadline(reply, budget);
    return {
      tier: r[0]!,
      previousTier: r[1]!,
      settledTier: r[8]!,
      blockedMsLeft: r[2]!,
      requests: r[3]!,
      repeats: r[4]!,
      routes: r[5]!,
      denials: r[6]!,
      score: r[7]!,
    };
  }
}

/** `work`, or a DeadlineExceededError after `budget` ms (work's outcome is still observed by the breaker). */
function withDeadline<T>(work: Promise<T>, budget: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new DeadlineExceededError(`policy state not read within ${budget} ms`)), budget);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}
