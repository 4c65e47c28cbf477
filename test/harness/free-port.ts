import * as net from 'node:net';

/** Redis Cluster listens on the client port and, for the cluster bus, on client port + 10000. */
export const CLUSTER_BUS_OFFSET = 10000;

function tryBind(port: number): Promise<number | undefined> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.unref();
    server.once('error', () => resolve(undefined));
    server.listen({ host: '127.0.0.1', port, exclusive: true }, () => {
      const address = server.address();
      const bound = typeof address === 'object' && address !== null ? address.port : undefined;
      server.close(() => resolve(bound));
    });
  });
}

/**
 * A loopback port that was free a moment ago (bind port 0, read it, release it). Another process
 * may still take it before the caller binds it, so callers retry on EADDRINUSE.
 * With `withClusterBus`, port + 10000 is free as well.
 */
export async function freePort(options: { withClusterBus?: boolean } = {}): Promise<number> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const port = await tryBind(0);
    if (port === undefined) continue;
    if (!options.withClusterBus) return port;
    const bus = port + CLUSTER_BUS_OFFSET;
    if (bus <= 65535 && (await tryBind(bus)) === bus) return port;
  }
  throw new Error('could not find a free loopback port after 100 attempts');
}
