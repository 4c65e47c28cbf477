import type { Registry } from 'prom-client';
import type { Route } from './http-listener';

/** Prometheus text exposition of the injected registry. */
export function metricsRoute(registry: Registry): Route {
  return (_req, res) => {
    registry.metrics().then(
      (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
      (err: unknown) => res.writeHead(500, { 'content-type': 'text/plain' }).end(String(err)),
    );
  };
}
