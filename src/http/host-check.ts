import { isLoopbackAddress } from './loopback-address';
import type { Route } from './http-listener';

/** The host of a Host header, lower case, without its port or IPv6 brackets; undefined when malformed. */
export function hostOfHeader(header: string | undefined): string | undefined {
  if (header === undefined || header === '') return undefined;
  const h = header.toLowerCase();
  if (h.startsWith('[')) {
    const end = h.indexOf(']');
    if (end < 0 || (end + 1 < h.length && !/^:\d+$/.test(h.slice(end + 1)))) return undefined;
    return h.slice(1, end);
  }
  const colon = h.indexOf(':');
  if (colon < 0) return h;
  return /^\d+$/.test(h.slice(colon + 1)) ? h.slice(0, colon) : undefined;
}

/**
 * True for the Host names an operator uses to reach a port bound to `listenHost`: `localhost`, a
 * loopback address, or `listenHost` itself. A page that rebinds its own DNS name to 127.0.0.1
 * still sends its own name, so it gets nothing.
 */
export function isAllowedHost(header: string | undefined, listenHost: string): boolean {
  const host = hostOfHeader(header);
  if (host === undefined) return false;
  return host === 'localhost' || isLoopbackAddress(host) || host === listenHost.toLowerCase();
}

/** Serves `routes` to allowed Host names only (isAllowedHost); any other gets 403 and one short line. */
export function allowedHostsOnly(routes: Readonly<Record<string, Route>>, listenHost: string): Record<string, Route> {
  const guarded: Record<string, Route> = {};
  for (const [path, route] of Object.entries(routes)) {
    guarded[path] = (req, res) => {
      if (isAllowedHost(req.headers.host, listenHost)) {
        route(req, res);
        return;
      }
      res.writeHead(403, { 'content-type': 'text/plain' }).end('host not allowed: use localhost, a loopback address or DEBUG_HOST\n');
    };
  }
  return guarded;
}
