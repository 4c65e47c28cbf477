import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RuleSet } from '../config/rule-types';
import { TIERS } from '../domain/policy-config';
import type { PolicyEngine } from '../policy/policy-engine';
import type { Route } from './http-listener';

const LOOKUP_BUDGET_MS = 1000;

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body) + '\n');
}

/** Debug `GET /policy?domain=D&client=C`: one client's current signals and tier, changing nothing. */
export function policyRoute(rules: () => RuleSet | undefined, engine: PolicyEngine): Route {
  return (req: IncomingMessage, res: ServerResponse) => {
    const query = new URL(req.url ?? '/', 'http://debug').searchParams;
    const domain = query.get('domain');
    const client = query.get('client');
    if (!domain || client === null) {
      sendJson(res, 400, { error: 'usage: /policy?domain=<domain>&client=<value of the policy client entry>' });
      return;
    }
    const policy = rules()?.policy(domain);
    if (policy === undefined) {
      sendJson(res, 404, { error: `domain '${domain}' has no policy` });
      return;
    }
    engine.lookUp(policy, client, Date.now() + LOOKUP_BUDGET_MS).then(
      (o) =>
        sendJson(res, 200, {
          domain,
          client,
          tier: TIERS[o.tier],
          shadowMode: policy.shadowMode,
          blockedMsLeft: o.blockedMsLeft,
          score: o.score,
          signals: { requests: o.requests, repeats: o.repeats, routes: o.routes, denials: o.denials },
        }),
      (err: unknown) => sendJson(res, 503, { error: `policy state not readable: ${err instanceof Error ? err.message : String(err)}` }),
    );
  };
}
