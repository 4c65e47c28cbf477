import * as grpc from '@grpc/grpc-js';
import type { HealthState } from '../base/health';
import type { WireHealthRequest, WireServingStatus } from '../rls/wire-types';

/** Service names Envoy and Kubernetes ask about. */
const KNOWN_SERVICES: ReadonlySet<string> = new Set(['', 'ratelimit']);

type StatusReply = { status: WireServingStatus };
type WatchCall = grpc.ServerWritableStream<WireHealthRequest, StatusReply>;

/**
 * Service `ratelimit` (and /healthcheck) follows the whole health; service `""` only the process,
 * never the backend, as in the reference (grpc-go's health server keeps `""` SERVING).
 */
function statusOf(health: HealthState, service: string): WireServingStatus {
  return (service === '' ? health.isProcessServing() : health.isServing()) ? 'SERVING' : 'NOT_SERVING';
}

export interface HealthService {
  readonly handlers: grpc.UntypedServiceImplementation;
  /** Ends every open Watch stream, so that a graceful shutdown does not wait on them. */
  endWatches(): void;
}

/** grpc.health.v1.Health handlers (Check and Watch) backed by the shared HealthState. */
export function healthService(health: HealthState): HealthService {
  // Watches of a known service get every change; one listener on `health` serves them all, so
  // any number of streams adds no listener (and no MaxListenersExceededWarning).
  // Each known-service watch, with the status it was last sent: a change is written only to the
  // streams whose own answer changed.
  const watchers = new Map<WatchCall, WireServingStatus>();
  // Every open Watch, unknown services included (they stay open, as the health protocol asks,
  // until the client leaves or the server shuts down).
  const open = new Set<WatchCall>();
  const onChange = (): void => {
    for (const [call, sent] of watchers) {
      const status = statusOf(health, call.request.service);
      if (status === sent) continue;
      watchers.set(call, status);
      call.write({ status });
    }
  };
  health.on('change', onChange);
  const handlers: grpc.UntypedServiceImplementation = {
    Check(call: grpc.ServerUnaryCall<WireHealthRequest, StatusReply>, callback: grpc.sendUnaryData<StatusReply>) {
      if (!KNOWN_SERVICES.has(call.request.service)) {
        callback({ code: grpc.status.NOT_FOUND, details: `unknown service '${call.request.service}'` });
        return;
      }
      callback(null, { status: statusOf(health, call.request.service) });
    },
    Watch(call: WatchCall) {
      const stop = (): void => {
        watchers.delete(call);
        open.delete(call);
      };
      call.on('cancelled', stop);
      call.on('close', stop);
      open.add(call);
      if (!KNOWN_SERVICES.has(call.request.service)) {
        call.write({ status: 'SERVICE_UNKNOWN' });
        return;
      }
      const status = statusOf(health, call.request.service);
      call.write({ status });
      watchers.set(call, status);
    },
  };
  return {
    handlers,
    endWatches() {
      for (const call of open) call.end();
      open.clear();
      watchers.clear();
    },
  };
}
