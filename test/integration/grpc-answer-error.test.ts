// An error while the gRPC handler builds its answer (after counting) reaches the caller as a
// status; it must not become an unhandled rejection that leaves the call without an answer.
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { GrpcServer } from '../../src/grpc/grpc-server';
import { HealthState } from '../../src/base/health';
import { createLogger } from '../../src/base/log';
import { PrometheusMetrics } from '../../src/metrics/metrics';
import type { RateLimitService } from '../../src/service/rate-limit-service';
import { loadSettings } from '../../src/settings/settings';
import type { RateLimitResponse } from '../../src/service/types';
import { oneDescriptor, rlsClient, type RlsTestClient } from '../helpers/rls-client';

describe('gRPC handler: an error while answering', () => {
  const health = new HealthState({ backendHealthy: () => true, backendCountsForHealth: true, rulesReady: () => true });
  // A response the wire conversion cannot read: reading its statuses throws.
  const unreadable = {
    overallCode: 'OK',
    get statuses(): never {
      throw new Error('statuses cannot be read');
    },
    responseHeadersToAdd: [],
    requestHeadersToAdd: [],
  } as unknown as RateLimitResponse;
  const service = { shouldRateLimit: () => Promise.resolve(unreadable) } as unknown as RateLimitService;
  const server = new GrpcServer({
    service,
    health,
    metrics: new PrometheusMetrics(),
    logger: createLogger('ERROR', 'text', () => {}),
    defaultDeadlineMs: 1000,
    limits: loadSettings({}).grpcLimits,
  });
  let client: RlsTestClient;
  beforeAll(async () => {
    const port = await server.listen('127.0.0.1:0');
    client = rlsClient(`127.0.0.1:${port}`);
  });
  afterAll(async () => {
    client?.close();
    await server.shutdown(0);
    health.close();
  });

  test('is answered with an INTERNAL status at once', async () => {
    const error = await client.shouldRateLimit(oneDescriptor('d', { k: 'v' }), 3000).then(
      () => undefined,
      (err: grpc.ServiceError) => err,
    );
    expect(error?.code).toBe(grpc.status.INTERNAL);
    expect(error?.details).toContain('statuses cannot be read');
  });
});
