import * as http from 'node:http';
import type { AddressInfo } from 'node:net';

export type Route = (req: http.IncomingMessage, res: http.ServerResponse) => void;

/** A small HTTP server with exact-path routes; unknown paths get 404. */
export class HttpListener {
  private readonly server: http.Server;

  constructor(private readonly routes: Readonly<Record<string, Route>>) {
    this.server = http.createServer((req, res) => {
      const path = (req.url ?? '/').split('?', 1)[0] as string;
      const route = this.routes[path];
      if (route === undefined) {
        res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
        return;
      }
      route(req, res);
    });
    // Idle keep-alive connections must not hold a shutdown open.
    this.server.keepAliveTimeout = 5000;
  }

  listen(host: string, port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => {
        this.server.off('error', reject);
        resolve((this.server.address() as AddressInfo).port);
      });
    });
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server.close(() => resolve());
      this.server.closeIdleConnections();
    });
  }
}

const MAX_BODY_BYTES = 1024 * 1024;

/** Reads a request body up to 1 MiB; rejects with `too large` past that. */
export function readBody(req: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        reject(new Error('too large'));
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}
