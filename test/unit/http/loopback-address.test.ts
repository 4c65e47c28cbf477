import type { IncomingMessage, ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import { isLoopbackAddress } from '../../../src/http/loopback-address';
import { jsonRouteFor } from '../../../src/http/service-routes';
import type { RateLimitService } from '../../../src/service/rate-limit-service';

describe('isLoopbackAddress', () => {
  it.each<[string | undefined, boolean]>([
    ['127.0.0.1', true],
    ['127.3.4.5', true],
    ['::1', true],
    ['::ffff:127.0.0.1', true],
    ['10.0.0.5', false],
    ['::ffff:10.0.0.5', false],
    ['fe80::1', false],
    ['0.0.0.0', false],
    ['128.0.0.1', false],
    [undefined, false],
  ])('%s → %s', (address, expected) => {
    expect(isLoopbackAddress(address)).toBe(expected);
  });
});

describe('jsonRouteFor: /json under gRPC mTLS (issue 8 finding 6, issue 18 finding 13)', () => {
  // A GET reaches the real route (405) without touching the service; a refused call gets 403.
  const statusFor = (grpcRequiresClientCerts: boolean, withoutClientCert: boolean, remoteAddress: string): number => {
    let status = 0;
    const res = {
      writeHead(s: number) {
        status = s;
        return this;
      },
      end() {
        return this;
      },
    };
    const route = jsonRouteFor(
      { defaultDeadlineMs: 1000, maxBodyBytes: 65536, grpcRequiresClientCerts, withoutClientCert },
      {} as RateLimitService,
    );
    route({ method: 'GET', socket: { remoteAddress } } as unknown as IncomingMessage, res as unknown as ServerResponse);
    return status;
  };

  it('is off for every peer, loopback included, while gRPC requires client certificates', () => {
    expect(statusFor(true, false, '10.0.0.7')).toBe(403);
    expect(statusFor(true, false, '127.0.0.6')).toBe(403);
    expect(statusFor(true, false, '127.0.0.1')).toBe(403);
  });

  it('HTTP_JSON_WITHOUT_CLIENT_CERT turns it on for every peer', () => {
    expect(statusFor(true, true, '10.0.0.7')).toBe(405);
  });

  it('serves every peer when gRPC does not require client certificates', () => {
    expect(statusFor(false, false, '10.0.0.7')).toBe(405);
  });
});
