import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { isIPv6 } from 'node:net';
import { Socket } from 'node:net';

/**
 * Where flushed statsd lines go. Sending never waits and never throws: what cannot be sent
 * (statsd away, a full buffer) is dropped and counted, so a dead statsd host costs the service
 * nothing but the bounded buffer.
 */
export interface StatsdTransport {
  /** Lines, each ending in `\n`. */
  send(payload: string): void;
  /** Bytes dropped so far because they could not be sent. */
  droppedBytes(): number;
  /** Sends what is queued (bounded in time), then closes the socket. */
  close(): Promise<void>;
}

/** At most this much waits to be sent at any time (gostats keeps about 4 MiB too). */
export const MAX_PENDING_BYTES = 4 * 1024 * 1024;
// One datagram stays below a 1500-byte MTU, as gostats sizes its UDP writes.
const MAX_DATAGRAM_BYTES = 1432;
// One TCP write at most (gostats' TCP buffer): what exceeds the pending bound is dropped a write
// at a time, never a whole flush.
const MAX_WRITE_BYTES = 64 * 1024;
// gostats' retry interval and dial timeout for its TCP sink.
const RECONNECT_MS = 3000;
const CONNECT_TIMEOUT_MS = 1500;
const CLOSE_WAIT_MS = 1000;

export interface TransportTarget {
  readonly host: string;
  readonly port: number;
  readonly protocol: 'tcp' | 'udp';
  /** Called once per connection failure streak (not per retry). */
  readonly onError?: (message: string) => void;
}

export function createStatsdTransport(target: TransportTarget): StatsdTransport {
  return target.protocol === 'udp' ? new UdpTransport(target) : new TcpTransport(target);
}

/** Splits lines into pieces of at most `maxBytes` characters, never cutting a line (a longer line is one piece). */
export function splitLines(payload: string, maxBytes: number): string[] {
  const out: string[] = [];
  let start = 0;
  let end = 0;
  while (end < payload.length) {
    const next = payload.indexOf('\n', end) + 1 || payload.length;
    if (next - start > maxBytes && end > start) {
      out.push(payload.slice(start, end));
      start = end;
    }
    end = next;
  }
  if (end > start) out.push(payload.slice(start, end));
  return out;
}

/** Splits lines into datagrams of at most MAX_DATAGRAM_BYTES, never cutting a line. */
export function datagrams(payload: string): string[] {
  return splitLines(payload, MAX_DATAGRAM_BYTES);
}

class UdpTransport implements StatsdTransport {
  private readonly socket: UdpSocket;
  private pending = 0;
  private dropped = 0;
  private failing = false;

  constructor(private readonly target: TransportTarget) {
    this.socket = createSocket(isIPv6(target.host) ? 'udp6' : 'udp4');
    this.socket.on('error', (err) => this.fail(err));
    this.socket.unref();
  }

  send(payload: string): void {
    for (const datagram of datagrams(payload)) {
      const bytes = Buffer.byteLength(datagram);
      if (this.pending + bytes > MAX_PENDING_BYTES) {
        this.dropped += bytes;
        continue;
      }
      this.pending += bytes;
      this.socket.send(datagram, this.target.port, this.target.host, (err) => {
        this.pending -= bytes;
        if (err) {
          this.dropped += bytes;
          this.fail(err);
        } else {
          this.failing = false;
        }
      });
    }
  }

  droppedBytes(): number {
    return this.dropped;
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, CLOSE_WAIT_MS);
      this.socket.close(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  private fail(err: Error): void {
    if (this.failing) return;
    this.failing = true;
    this.target.onError?.(`statsd ${this.target.host}:${this.target.port} (udp): ${err.message}`);
  }
}

/** TCP as gostats' default sink: one connection, reconnected in the background. */
class TcpTransport implements StatsdTransport {
  private socket: Socket | undefined;
  private connected = false;
  private queue: string[] = [];
  private queuedBytes = 0;
  private dropped = 0;
  private failing = false;
  private closed = false;
  private retry: NodeJS.Timeout | undefined;

  constructor(private readonly target: TransportTarget) {
    this.connect();
  }

  send(payload: string): void {
    for (const piece of payload.length > MAX_WRITE_BYTES ? splitLines(payload, MAX_WRITE_BYTES) : [payload]) this.write(piece);
  }

  private write(piece: string): void {
    const bytes = Buffer.byteLength(piece);
    const socket = this.socket;
    if (this.connected && socket !== undefined) {
      // The socket's own buffer counts toward the bound: a statsd that stops reading must not
      // make it grow without end.
      if (socket.writableLength + bytes > MAX_PENDING_BYTES) this.dropped += bytes;
      else socket.write(piece);
      return;
    }
    if (this.queuedBytes + bytes > MAX_PENDING_BYTES) {
      this.dropped += bytes;
      return;
    }
    this.queue.push(piece);
    this.queuedBytes += bytes;
  }

  droppedBytes(): number {
    return this.dropped;
  }

  close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retry);
    const socket = this.socket;
    if (socket === undefined || !this.connected) {
      socket?.destroy();
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        socket.destroy();
        resolve();
      }, CLOSE_WAIT_MS);
      socket.end(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  private connect(): void {
    if (this.closed) return;
    const socket = new Socket();
    this.socket = socket;
    socket.setNoDelay(true);
    socket.setTimeout(CONNECT_TIMEOUT_MS, () => {
      if (!this.connected) socket.destroy(new Error(`no connection within ${CONNECT_TIMEOUT_MS} ms`));
    });
    socket.once('connect', () => {
      socket.setTimeout(0);
      this.connected = true;
      this.failing = false;
      const queued = this.queue;
      this.queue = [];
      this.queuedBytes = 0;
      for (const piece of queued) this.write(piece);
    });
    socket.on('error', (err) => this.fail(err));
    socket.once('close', () => {
      this.connected = false;
      if (this.socket === socket) this.socket = undefined;
      if (!this.closed) {
        this.retry = setTimeout(() => this.connect(), RECONNECT_MS);
        this.retry.unref();
      }
    });
    // statsd never answers; whatever it sends is read and dropped.
    socket.on('data', () => undefined);
    socket.connect(this.target.port, this.target.host);
    socket.unref();
  }

  private fail(err: Error): void {
    if (this.failing) return;
    this.failing = true;
    this.target.onError?.(`statsd ${this.target.host}:${this.target.port} (tcp): ${err.message}`);
  }
}
