import type { IncomingMessage, ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import { isLoopbackAddress, loopbackOnly } from '../../../src/http/loopback-only';
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

describe('loopbackOnly', () => {
  // The route sees only the peer address and the response; no socket is opened.
  const call = (remoteAddress: string) => {
    let served = false;
    const res = {
      status: 0,
      body: '',
      writeHead(status: number) {
        this.status = status;
        return this;
      },
      end(body: string) {
        this.body = body;
        return this;
      },
    };
    const route = loopbackOnly(() => {
      served = true;
    }, 'why');
    route({ socket: { remoteAddress } } as unknown as IncomingMessage, res as unknown as ServerResponse);
    return { served, res };
  };

  it('serves a loopback peer', () => {
    expect(call('127.0.0.1').served).toBe(true);
  });

  it('answers any other peer 403 with the reason, without calling the route', () => {
    const { served, res } = call('10.1.2.3');
    expect(served).toBe(false);
    expect(res.status).toBe(403);
    expect(JSON.parse(res.body)).toEqual({ error: expect.stringContaining('why') });
  });
});

describe('jsonRouteFor: /json under gRPC mTLS (issue 8, finding 6)', () => {
  // A GET reaches the real route (405) without touching the service; a refused peer gets 403.
  const statusFor = (grpcRequiresClientCerts: boolean, remoteAddress: string): number => {
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
    const route = jsonRouteFor({ defaultDeadlineMs: 1000, maxBodyBytes: 65536, grpcRequiresClientCerts }, {} as RateLimitService);
    route({ method: 'GET', socket: { remoteAddress } } as unknown as IncomingMessage, res as unknown as ServerResponse);
    return status;
  };

  it('refuses a remote peer while gRPC requires client certificates', () => {
    expect(statusFor(true, '10.0.0.7')).toBe(403);
    expect(statusFor(true, '127.0.0.1')).toBe(405);
  });

  it('serves every peer when gRPC does not require client certificates', () => {
    expect(statusFor(false, '10.0.0.7')).toBe(405);
  });
});
