import * as grpc from '@grpc/grpc-js';
import type { HealthState } from '../health';
import type { WireHealthRequest, WireServingStatus } from '../rls/wire-types';

/** Service names Envoy and Kubernetes ask about. */
const KNOWN_SERVICES: ReadonlySet<string> = new Set(['', 'ratelimit']);

type StatusReply = { status: WireServingStatus };

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
  const watches = new Set<grpc.ServerWritableStream<WireHealthRequest, StatusReply>>();
  const handlers: grpc.UntypedServiceImplementation = {
    Check(call: grpc.ServerUnaryCall<WireHealthRequest, StatusReply>, callback: grpc.sendUnaryData<StatusReply>) {
      if (!KNOWN_SERVICES.has(call.request.service)) {
        callback({ code: grpc.status.NOT_FOUND, details: `unknown service '${call.request.service}'` });
        return;
      }
      callback(null, { status: statusOf(health) });
    },
    Watch(call: grpc.ServerWritableStream<WireHealthRequest, StatusReply>) {
      if (!KNOWN_SERVICES.has(call.request.service)) {
        call.write({ status: 'SERVICE_UNKNOWN' });
        return;
      }
      const onChange = (): void => {
        call.write({ status: statusOf(health) });
      };
      const stop = (): void => {
        health.off('change', onChange);
        watches.delete(call);
      };
      call.write({ status: statusOf(health) });
      health.on('change', onChange);
      watches.add(call);
      call.on('cancelled', stop);
      call.on('close', stop);
    },
  };
  return {
    handlers,
    endWatches() {
      for (const call of watches) call.end();
      watches.clear();
    },
  };
}
