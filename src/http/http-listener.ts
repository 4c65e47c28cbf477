import * as http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { RequestTooLargeError } from '../base/errors';
import { ConnectionSlots } from './connection-slots';

/** Bounds on what one HTTP client can make the server hold (HTTP_*); for every HTTP port. */
export interface HttpLimits {
  /**
   * The whole request (headers and body) must arrive within this time, else 408 and close; and
   * an answer, once produced, must be written out (read by the client) within it, else close.
   */
  readonly requestTimeoutMs: number;
  /** The headers must arrive within this time. */
  readonly headersTimeoutMs: number;
  /** A larger body gets 413. */
  readonly maxBodyBytes: number;
  /**
   * Connections held at once per port. When full, the connection waiting longest without a
   * whole request is closed for the new one (connection-slots.ts).
   */
  readonly maxConnections: number;
  /** Connections one peer address holds at once per port; its own waiting ones go first. */
  readonly maxConnectionsPerPeer: number;
}

export type Route = (req: http.IncomingMessage, res: http.ServerResponse) => void;

// Node checks the request and header timeouts on this interval (30 s by default, which would
// let a slow client stay three times longer than HTTP_REQUEST_TIMEOUT says).
const TIMEOUT_CHECK_INTERVAL_MS = 500;

/**
 * A small HTTP server with exact-path routes; unknown paths get 404. `limits` bound what one
 * client can hold: the time to send a request, the number of connections (and, in readBody,
 * the body size).
 */
export class HttpListener {
  private readonly server: http.Server;
  private readonly slots: ConnectionSlots;
  private readonly writeTimeoutMs: number;

  constructor(
    private readonly routes: Readonly<Record<string, Route>>,
    limits: HttpLimits,
  ) {
    this.writeTimeoutMs = limits.requestTimeoutMs;
    this.server = http.createServer(
      {
        requestTimeout: limits.requestTimeoutMs,
        headersTimeout: limits.headersTimeoutMs,
        connectionsCheckingInterval: Math.min(TIMEOUT_CHECK_INTERVAL_MS, limits.headersTimeoutMs),
      },
      (req, res) => {
        this.trackAnswer(req, res);
        const path = (req.url ?? '/').split('?', 1)[0] as string;
        const route = this.routes[path];
        if (route === undefined) {
          res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
          return;
        }
        route(req, res);
      },
    );
    // Not net.Server's maxConnections, which refuses the newest: slowloris then locks everyone out.
    this.slots = new ConnectionSlots({ maxConnections: limits.maxConnections, maxPerPeer: limits.maxConnectionsPerPeer });
    this.server.on('connection', (socket: Socket) => this.slots.admit(socket));
    // Idle keep-alive connections must not hold a shutdown open.
    this.server.keepAliveTimeout = 5000;
  }

  /** Connections closed so far to make room for newer ones (tests, debugging). */
  get evictedConnections(): number {
    return this.slots.evicted;
  }

  /**
   * A request whose bytes have all arrived is being answered: its connection is not evicted
   * until the answer is out. Until then (slow headers, a slow body) it may be. Since a busy
   * connection is never evicted, a client that asks for a large answer and never reads it would
   * keep its slot (and the unwritten answer in memory) forever: once produced, the answer must
   * be written out within HTTP_REQUEST_TIMEOUT, else the connection is closed. The deadline
   * starts when the route ends its answer, not before, so a slow backend is not cut short here
   * (the routes' own deadlines bound that).
   */
  private trackAnswer(req: http.IncomingMessage, res: http.ServerResponse): void {
    const socket = req.socket;
    // Only an answer counted as owed is counted out (pipelined requests share one count).
    let owed = false;
    const markBusy = (): void => {
      if (res.writableEnded) return;
      owed = true;
      this.slots.busy(socket);
    };
    const hasBody = req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
    if (hasBody && !req.complete) req.once('end', markBusy);
    else markBusy();
    // 'prefinish': end() was called and the whole answer handed to the socket.
    res.once('prefinish', () => {
      const deadline = setTimeout(() => socket.destroy(), this.writeTimeoutMs);
      deadline.unref();
      res.once('close', () => clearTimeout(deadline));
    });
    res.once('close', () => {
      if (owed) this.slots.answered(socket);
    });
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

/**
 * Reads a request body of at most `maxBytes`; rejects with RequestTooLargeError past that, at
 * once when Content-Length says so. The rest of a body that is too large is read and dropped
 * (within HTTP_REQUEST_TIMEOUT) rather than the connection reset, so the client gets its 413.
 */
export function readBody(req: http.IncomingMessage, maxBytes: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const tooLarge = (): RequestTooLargeError => new RequestTooLargeError(`request body is larger than ${maxBytes} bytes (HTTP_MAX_BODY_BYTES)`);
    const declared = Number(req.headers['content-length']);
    const chunks: Buffer[] = [];
    let size = 0;
    let over = Number.isFinite(declared) && declared > maxBytes;
    if (over) reject(tooLarge());
    req.on('data', (chunk: Buffer) => {
      if (over) return;
      size += chunk.length;
      if (size > maxBytes) {
        over = true;
        chunks.length = 0;
        reject(tooLarge());
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}
