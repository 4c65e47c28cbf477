import * as grpc from '@grpc/grpc-js';
import type { HealthState } from '../health';
import type { WireHealthRequest, WireServingStatus } from '../rls/wire-types';

/** Service names Envoy and Kubernetes ask about. */
const KNOWN_SERVICES: ReadonlySet<string> = new Set(['', 'ratelimit']);

type StatusReply = { status: WireServingStatus };
type WatchCall = grpc.ServerWritableStream<WireHealthRequest, StatusReply>;

function statusOf(health: HealthState): WireServingStatus {
  return health.isServing() ? 'SERVING' : 'NOT_SERVING';
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
  const watchers = new Set<WatchCall>();
  // Every open Watch, unknown services included (they stay open, as the health protocol asks,
  // until the client leaves or the server shuts down).
  const open = new Set<WatchCall>();
  const onChange = (): void => {
    const status = statusOf(health);
    for (const call of watchers) call.write({ status });
  };
  health.on('change', onChange);
  const handlers: grpc.UntypedServiceImplementation = {
    Check(call: grpc.ServerUnaryCall<WireHealthRequest, StatusReply>, callback: grpc.sendUnaryData<StatusReply>) {
      if (!KNOWN_SERVICES.has(call.request.service)) {
        callback({ code: grpc.status.NOT_FOUND, details: `unknown service '${call.request.service}'` });
        return;
      }
      callback(null, { status: statusOf(health) });
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
      call.write({ status: statusOf(health) });
      watchers.add(call);
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
