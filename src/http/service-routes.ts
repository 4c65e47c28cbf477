import type { IncomingMessage, ServerResponse } from 'node:http';
import { httpStatusOf } from '../error-status';
import { FloodgateError, InvalidRequestError } from '../errors';
import { requestFromWire } from '../rls/convert';
import type { HealthState } from '../health';
import type { RateLimitHandler } from '../service/rate-limit-handler';
import { readBody, type Route } from './http-listener';
import { loopbackOnly } from './loopback-only';
import { responseToJson, wireRequestFromJson } from './json-codec';

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body) + '\n');
}

/** `/healthcheck`: 200 `OK` when healthy, 500 otherwise (the reference's contract). */
export function healthcheckRoute(health: HealthState): Route {
  return (_req, res) => {
    if (health.isServing()) res.writeHead(200, { 'content-type': 'text/plain' }).end('OK');
    else res.writeHead(500, { 'content-type': 'text/plain' }).end('NOT_SERVING');
  };
}

/** `/json` (POST): the RLS call in protobuf JSON; 200 OK, 429 OVER_LIMIT, 400 bad request. */
export function jsonRoute(service: RateLimitHandler, defaultDeadlineMs: number, maxBodyBytes: number): Route {
  return (req: IncomingMessage, res: ServerResponse) => {
    if (req.method !== 'POST') {
      res.writeHead(405, { allow: 'POST', 'content-type': 'text/plain' }).end('method not allowed\n');
      return;
    }
    readBody(req, maxBodyBytes)
      .catch((err: unknown) => {
        throw err instanceof FloodgateError ? err : new InvalidRequestError('request body was not received');
      })
      .then((body) => service.shouldRateLimit(requestFromWire(wireRequestFromJson(body)), Date.now() + defaultDeadlineMs, req.headers))
      .then(
        (response) => sendJson(res, response.overallCode === 'OVER_LIMIT' ? 429 : 200, responseToJson(response)),
        (err: unknown) => sendJson(res, httpStatusOf(err), { error: err instanceof Error ? err.message : String(err) }),
      );
  };
}

export interface JsonRouteOptions {
  readonly defaultDeadlineMs: number;
  readonly maxBodyBytes: number;
  /** GRPC_CLIENT_TLS_CACERT is set: gRPC callers must show a client certificate. */
  readonly grpcRequiresClientCerts: boolean;
}

/**
 * `/json` as the settings ask. It answers the same calls as gRPC: while gRPC requires client
 * certificates, it answers peers on this host only, so the HTTP port is not a way around mTLS.
 */
export function jsonRouteFor(options: JsonRouteOptions, service: RateLimitHandler): Route {
  const route = jsonRoute(service, options.defaultDeadlineMs, options.maxBodyBytes);
  if (!options.grpcRequiresClientCerts) return route;
  return loopbackOnly(route, '/json answers loopback clients only while gRPC requires client certificates (GRPC_CLIENT_TLS_CACERT)');
}
