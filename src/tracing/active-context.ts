import { AsyncLocalStorage } from 'node:async_hooks';
import type { Context } from '@opentelemetry/api';

/**
 * The trace context of the call being served, carried across its awaits. floodgate's own store
 * rather than the global OpenTelemetry context manager: nothing global is registered, so
 * several apps in one process (tests) each keep their own traces.
 */
export class ActiveContext {
  private readonly storage = new AsyncLocalStorage<Context>();

  run<T>(context: Context, fn: () => T): T {
    return this.storage.run(context, fn);
  }

  current(): Context | undefined {
    return this.storage.getStore();
  }
}
