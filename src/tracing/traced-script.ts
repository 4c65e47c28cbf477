import { SpanKind, SpanStatusCode, type Tracer } from '@opentelemetry/api';
import type { LuaScript } from '../limiter/redis/lua-script';
import type { ActiveContext } from './active-context';

export const REDIS_SCRIPT_SPAN = 'Redis Script Execution';

/**
 * A child span per Redis script call, under the ShouldRateLimit span that made it. Calls made
 * outside a traced call (none today) are not traced. A merged call serving several requests is
 * traced once, under the request that started the batch.
 */
export function tracedScript(script: LuaScript, name: string, tracer: Tracer, active: ActiveContext): LuaScript {
  return {
    run(client, keys, args) {
      const parent = active.current();
      if (parent === undefined) return script.run(client, keys, args);
      const span = tracer.startSpan(
        REDIS_SCRIPT_SPAN,
        { kind: SpanKind.CLIENT, attributes: { 'db.system': 'redis', 'db.operation': 'EVALSHA', script: name, keys: keys.length } },
        parent,
      );
      return script.run(client, keys, args).then(
        (reply) => {
          span.end();
          return reply;
        },
        (err: unknown) => {
          const message = err instanceof Error ? err.message : String(err);
          span.recordException(err instanceof Error ? err : message);
          span.setStatus({ code: SpanStatusCode.ERROR, message });
          span.end();
          throw err;
        },
      );
    },
  };
}
