import { constants, type Http2Session, type IncomingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import type { GrpcHttp2Server } from './http2-servers';
import { grpcTimeoutMs } from './grpc-timeout';

/** Bounds on what one HTTP/2 client can make the gRPC server hold or do (issue 18). */
export interface ConnectionBounds {
  /** Connections held at once per gRPC port; more are closed at once (GRPC_MAX_CONNECTIONS). */
  readonly maxConnections: number;
  /** A call whose request has not fully arrived after this long is reset (GRPC_MAX_REQUEST_RECEIVE_TIME). */
  readonly maxRequestReceiveMs: number;
  /** Calls one connection may reset before the server answers, at once... (GRPC_MAX_RESET_BURST) */
  readonly resetBurst: number;
  /** ...and then per second (GRPC_MAX_RESETS_PER_SECOND); past that the connection is closed. */
  readonly resetsPerSecond: number;
}

/** What the guard did, for the log. */
export interface ConnectionGuardEvents {
  onResetFlood(peer: string | undefined): void;
}

/** A token bucket of the resets one connection may still make. */
interface ResetAllowance {
  tokens: number;
  lastMs: number;
}

const SWEEP_INTERVAL_MS = 250;

/**
 * Installs the bounds of `ConnectionBounds` on each node:http2 server grpc-js creates (see
 * http2-servers.ts). A stream costs a Map entry or two and a listener while it is open; a reset
 * and the sweep are the only other work.
 *
 * - Unfinished requests: a stream in progress is not idle, and a call without `grpc-timeout`
 *   has no deadline, so without this a stream that never sends END_STREAM holds its partial
 *   message forever (6,000 of them held 430 MB).
 * - Rapid reset (CVE-2023-44487): a call sent and reset at once frees its stream slot, so
 *   SETTINGS_MAX_CONCURRENT_STREAMS does not bound them; nghttp2's own limit (node 20: 1,000
 *   resets, then 33 a second) let one connection keep the event loop busy. A reset counts when
 *   the client cancels a call the server has not answered yet.
 */
export class ConnectionGuard {
  /**
   * Open streams whose request had not fully arrived when they opened, with the deadline for
   * it; insertion order is deadline order. A stream leaves at its close, or at the sweep after
   * its deadline, which resets it unless its request has arrived by then (readableEnded): no
   * 'end' listener per call.
   */
  private readonly unfinished = new Map<ServerHttp2Stream, number>();
  /** Streams this guard reset itself: their close is not the client's reset. */
  private readonly resetByUs = new WeakSet<ServerHttp2Stream>();
  /**
   * When each open call's own deadline (grpc-timeout) passes, for the calls that sent one;
   * dropped when the stream closes. A Map, not a WeakMap: WeakMap.set is a call into the
   * runtime and its ephemerons cost every GC, about a microsecond per call in all.
   */
  private readonly deadlines = new Map<ServerHttp2Stream, number>();
  private readonly sweepTimer: NodeJS.Timeout;

  constructor(
    private readonly bounds: ConnectionBounds,
    private readonly events: ConnectionGuardEvents,
  ) {
    this.sweepTimer = setInterval(() => this.sweep(), Math.min(SWEEP_INTERVAL_MS, bounds.maxRequestReceiveMs));
    this.sweepTimer.unref();
  }

  /** Bounds `http2Server`'s connections, and watches its sessions and streams. */
  install(http2Server: GrpcHttp2Server): void {
    http2Server.maxConnections = this.bounds.maxConnections;
    http2Server.on('session', (session: Http2Session) => this.watchSession(session));
  }

  close(): void {
    clearInterval(this.sweepTimer);
    this.unfinished.clear();
    this.deadlines.clear();
  }

  private watchSession(session: Http2Session): void {
    const allowance: ResetAllowance = { tokens: this.bounds.resetBurst, lastMs: Date.now() };
    const unfinished = this.unfinished;
    const deadlines = this.deadlines;
    const afterClose = (stream: ServerHttp2Stream): void => {
      this.afterClose(stream, session, allowance);
      deadlines.delete(stream);
    };
    // One listener per connection, shared by its streams (`this` is the stream, which no longer
    // knows its session once closed).
    const onStreamClose = function (this: ServerHttp2Stream): void {
      unfinished.delete(this);
      afterClose(this);
    };
    // Before the listener that hands the stream to grpc-js: watched before any of its work.
    session.prependListener('stream', (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => {
      const timeout = grpcTimeoutMs(headers['grpc-timeout']);
      if (timeout !== undefined) this.deadlines.set(stream, Date.now() + timeout);
      if (stream.destroyed) {
        // Sent and reset in one read: closed before anyone could listen.
        afterClose(stream);
        return;
      }
      if (!stream.readableEnded) this.unfinished.set(stream, Date.now() + this.bounds.maxRequestReceiveMs);
      // `on`, not `once`: 'close' comes once per stream, and `once` wraps the listener in a new
      // bound function per call.
      stream.on('close', onStreamClose);
    });
  }

  /** A client's reset of a call not yet answered spends one of its connection's allowance. */
  private afterClose(stream: ServerHttp2Stream, session: Http2Session, allowance: ResetAllowance): void {
    if (!stream.aborted || this.resetByUs.has(stream) || session.closed || session.destroyed) return;
    const now = Date.now();
    // A client that gives up when its own deadline passes (grpc-timeout; Envoy's 20 ms) keeps
    // its word: only a reset before the deadline it sent is the rapid-reset pattern.
    const deadline = this.deadlines.get(stream);
    if (deadline !== undefined && now >= deadline - DEADLINE_SLACK_MS) return;
    allowance.tokens = Math.min(this.bounds.resetBurst, allowance.tokens + ((now - allowance.lastMs) * this.bounds.resetsPerSecond) / 1000);
    allowance.lastMs = now;
    allowance.tokens -= 1;
    if (allowance.tokens >= 0) return;
    this.events.onResetFlood(session.socket?.remoteAddress);
    // GOAWAY with ENHANCE_YOUR_CALM: nghttp2 then drops the client's new streams unread, and the
    // connection closes once the calls in flight are answered. The client may reconnect, with a
    // fresh allowance, but each connection costs it a handshake.
    session.goaway(constants.NGHTTP2_ENHANCE_YOUR_CALM);
    session.close();
  }

  /** Resets every stream whose request is still incomplete past its deadline. */
  private sweep(): void {
    const now = Date.now();
    for (const [stream, deadline] of this.unfinished) {
      if (deadline > now) return;
      this.unfinished.delete(stream);
      // Its request arrived in time ('end' was emitted): the call only waits for its answer.
      if (stream.destroyed || stream.readableEnded) continue;
      this.resetByUs.add(stream);
      stream.close(constants.NGHTTP2_CANCEL);
    }
  }
}

/** A client's clock and ours differ by the network's delay; a reset this close to its deadline is the deadline. */
const DEADLINE_SLACK_MS = 2;
