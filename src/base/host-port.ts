/**
 * `host:port` as Go's net.JoinHostPort writes it: a host with a colon (an IPv6 address) goes in
 * brackets, so `::` and 8081 make `[::]:8081`, an address grpc-js and URLs read as one host.
 */
export function joinHostPort(host: string, port: number | string): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}
