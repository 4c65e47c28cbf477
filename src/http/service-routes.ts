import type { IncomingMessage, ServerResponse } from 'node:http';
import { httpStatusOf } from '../base/error-status';
import { FloodgateError, InvalidRequestError } from '../base/errors';
import { requestFromWire } from '../rls/convert';
import type { HealthState } from '../base/health';
import type { RateLimitHandler } from '../service/rate-limit-handler';
import { readBody, type Route } from './http-listener';
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
  /** HTTP_JSON_WITHOUT_CLIENT_CERT: serve /json anyway, to any client, while gRPC requires certificates. */
  readonly withoutClientCert: boolean;
}

const JSON_OFF_UNDER_MTLS =
  '/json is off while gRPC requires client certificates (GRPC_CLIENT_TLS_CACERT); HTTP_JSON_WITHOUT_CLIENT_CERT=true turns it on for every client';

/**
 * `/json` as the settings ask. It answers the same calls as gRPC: while gRPC requires client
 * certificates it is off (403), so the HTTP port is no way around them, unless the operator
 * turns it on. A peer's address proves nothing: a same-pod proxy (Istio's sidecar connects from
 * 127.0.0.6) forwards any remote client from loopback.
 */
export function jsonRouteFor(options: JsonRouteOptions, service: RateLimitHandler): Route {
  if (options.grpcRequiresClientCerts && !options.withoutClientCert) return (_req, res) => sendJson(res, 403, { error: JSON_OFF_UNDER_MTLS });
  return jsonRoute(service, options.defaultDeadlineMs, options.maxBodyBytes);
}
