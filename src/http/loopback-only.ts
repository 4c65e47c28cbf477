import type { Route } from './http-listener';

/** True for 127.0.0.0/8, ::1 and their IPv4-mapped form: a peer on this host. */
export function isLoopbackAddress(address: string | undefined): boolean {
  if (address === undefined) return false;
  const v4 = address.startsWith('::ffff:') ? address.slice(7) : address;
  return /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(v4) || address === '::1';
}

/**
 * Serves `route` to peers on this host only; anyone else gets 403 with `reason`. Used for /json
 * while gRPC requires client certificates, so the HTTP port is not a way around them.
 */
export function loopbackOnly(route: Route, reason: string): Route {
  return (req, res) => {
    if (isLoopbackAddress(req.socket.remoteAddress)) {
      route(req, res);
      return;
    }
    res.writeHead(403, { 'content-type': 'application/json' }).end(JSON.stringify({ error: reason }) + '\n');
  };
}
