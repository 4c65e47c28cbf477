import { constants, type Http2Session, type IncomingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import type { Socket } from 'node:net';
import { ConnectionSlots, type Slot } from './connection-slots';
import type { GrpcHttp2Server } from './http2-servers';
import { grpcTimeoutMs } from './grpc-timeout';
import { RequestBudget } from './request-budget';

/** Bounds on what one HTTP/2 client can make the gRPC server hold or do (issue 18). */
export interface ConnectionBounds {
  /** Connections held at once per gRPC port; a new one past it takes the slot of another (GRPC_MAX_CONNECTIONS, connection-slots.ts). */
  readonly maxConnections: number;
  /** A connection on which no call has finished this long after it opened is closed (GRPC_MAX_FIRST_CALL_TIME). */
  readonly maxFirstCallMs: number;
  /** Bytes of requests still arriving, over every connection (GRPC_MAX_UNFINISHED_REQUEST_BYTES, request-budget.ts). */
  readonly maxUnfinishedRequestBytes: number;
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
  /** Streams reset because GRPC_MAX_UNFINISHED_REQUEST_BYTES was full, in the last second or so. */
  onRequestBudgetFull(resets: number): void;
  /** Connections closed to make room for new ones, or for want of a first call, in the last second or so. */
  onConnectionsEvicted(count: number): void;
}

/** A token bucket of the resets one connection may still make. */
interface ResetAllowance {
  tokens: number;
  lastMs: number;
}

/** A connection's resets, as the guard counts them. */
interface ConnectionResets {
  allowance: ResetAllowance;
  /** The server stall (`stalls`) whose credit `stallCredits` counts. */
  stall: number;
  /** Resets excused by the stall's credit that this connection may still make (GRPC_MAX_RESET_BURST per stall). */
  stallCredits: number;
}

const SWEEP_INTERVAL_MS = 250;
/** The budget's resets and the slots' evictions are logged at most this often, as counts. */
const REPORT_INTERVAL_MS = 1000;

/**
 * Installs the bounds of `ConnectionBounds` on each node:http2 server grpc-js creates (see
 * http2-servers.ts). A stream costs a Map entry or two and two listeners while it is open; a
 * reset, a new connection and the sweep are the only other work.
 *
 * - Connections: see connection-slots.ts.
 * - Bytes of unfinished requests, process-wide: see request-budget.ts.
 * - Unfinished requests: a stream in progress is not idle, and a call without `grpc-timeout`
 *   has no deadline, so without this a stream that never sends END_STREAM holds its partial
 *   message forever (6,000 of them held 430 MB).
 * - Rapid reset (CVE-2023-44487): a call sent and reset at once frees its stream slot, so
 *   SETTINGS_MAX_CONCURRENT_STREAMS does not bound them; nghttp2's own limit (node 20: 1,000
 *   resets, then 33 a second) let one connection keep the event loop busy. A reset counts when
 *   the client resets a call (RST_STREAM) before the server has answered it, whatever the call's
 *   headers, unless the call had been open on the server for its whole `grpc-timeout` (counted
 *   from when the server could first have read it, so that a stall of the server does not turn
 *   the client's deadline into a reset). Once a connection has spent its allowance, the peer's
 *   next connections share what is left of it until it has filled again: reconnecting does not
 *   renew it. Behind a sidecar or NAT (one address for every client) that also holds for the
 *   other clients' new connections; since a reset at the client's deadline never counts, only
 *   their resets before it (a downstream gone) are at stake.
 */
export class ConnectionGuard {
  /**
   * Open streams whose request had not fully arrived when they opened, with the deadline for
   * it; insertion order is deadline order. A stream leaves at its close, or at the sweep after
   * its deadline, which resets it unless its request has arrived by then (readableEnded): no
   * 'end' listener per call.
   */
  private readonly unfinished = new Map<ServerHttp2Stream, number>();
  /** Calls of each connection reset to make room in the budget (rare: a WeakMap costs nothing per call). */
  private readonly budgetResets = new WeakMap<Http2Session, number>();
  /** Streams this guard reset itself: their close is not the client's reset. */
  private readonly resetByUs = new WeakSet<ServerHttp2Stream>();
  /**
   * For the calls that sent `grpc-timeout`: when (performance.now()) a reset no longer counts,
   * the call having been open on the server for its whole timeout; dropped when the stream
   * closes. A Map, not a WeakMap: WeakMap.set is a call into the runtime and its ephemerons
   * cost every GC, about a microsecond per call in all.
   */
  private readonly deadlines = new Map<ServerHttp2Stream, number>();
  /**
   * For the calls whose deadline counts from before a stall of the server (arrivedBy): when
   * their whole timeout has passed since the server read them. Between the two, a reset is
   * excused by the stall's credit, which is bounded per connection and per stall.
   */
  private readonly uncreditedDeadlines = new Map<ServerHttp2Stream, number>();
  /** The allowance left to each peer whose connection was closed for resets, until it fills again. */
  private readonly floodedPeers = new Map<string, ResetAllowance>();
  private readonly budget: RequestBudget;
  /** One per gRPC port. */
  private readonly slots: ConnectionSlots[] = [];
  private lastReportMs = 0;
  private readonly sweepTimer: NodeJS.Timeout;
  /** When (performance.now()) the event loop last ran `loopTimer`: how late the server reads what arrived. */
  private loopSeenMs = performance.now();
  /** The loop's idle time (event-loop utilization) when `loopTimer` last ran. */
  private loopIdleMs = performance.eventLoopUtilization().idle;
  /** The last stall `loopTimer` saw: from when it could have run, to when it did. */
  private stallStartMs = 0;
  private stallEndMs = -Infinity;
  /** Stalls seen so far: each gives a connection GRPC_MAX_RESET_BURST credited resets. */
  private stalls = 0;
  private readonly loopTimer: NodeJS.Timeout;

  constructor(
    private readonly bounds: ConnectionBounds,
    private readonly events: ConnectionGuardEvents,
  ) {
    this.budget = new RequestBudget(bounds.maxUnfinishedRequestBytes, (stream, bytes) => this.makeRoom(stream, bytes));
    this.sweepTimer = setInterval(() => this.sweep(), Math.min(SWEEP_INTERVAL_MS, bounds.maxRequestReceiveMs));
    this.sweepTimer.unref();
    this.loopTimer = setInterval(() => this.loopRan(), LOOP_TICK_MS);
    this.loopTimer.unref();
  }

  /** Bounds `http2Server`'s connections, and watches its sessions and streams. */
  install(http2Server: GrpcHttp2Server): void {
    const slots = new ConnectionSlots(this.bounds.maxConnections, this.bounds.maxFirstCallMs);
    this.slots.push(slots);
    // A backstop only: the slots keep the port at maxConnections, and the sockets of connections
    // they closed gracefully go within seconds.
    http2Server.maxConnections = 2 * this.bounds.maxConnections;
    // Prepended: node:http2's own 'connection' listener makes the session (and emits 'session')
    // at once for plaintext; the slot must exist by then for the session to find it.
    http2Server.prependListener('connection', (socket: Socket) => slots.admit(socket, Date.now()));
    http2Server.on('session', (session: Http2Session) => this.watchSession(session, slots.attach(session)));
  }

  close(): void {
    clearInterval(this.sweepTimer);
    clearInterval(this.loopTimer);
    this.unfinished.clear();
    this.deadlines.clear();
    this.uncreditedDeadlines.clear();
    this.budget.clear();
  }

  private watchSession(session: Http2Session, slot: Slot | undefined): void {
    const peer = session.socket?.remoteAddress;
    // Shared with the peer's flooded connection (see allowanceFor).
    const resets: ConnectionResets = { allowance: this.allowanceFor(peer), stall: 0, stallCredits: 0 };
    const unfinished = this.unfinished;
    const deadlines = this.deadlines;
    const uncredited = this.uncreditedDeadlines;
    const budget = this.budget;
    const afterClose = (stream: ServerHttp2Stream): void => {
      this.afterClose(stream, session, resets);
      deadlines.delete(stream);
      uncredited.delete(stream);
    };
    // One listener per connection, shared by its streams (`this` is the stream, which no longer
    // knows its session once closed).
    const onStreamClose = function (this: ServerHttp2Stream): void {
      unfinished.delete(this);
      // A call answered, or a whole request the client then gave up on (Envoy at its 20 ms
      // deadline while Redis is slow): a client, whose connection must not be taken for a slot
      // holder.
      // headersSent: the server began an answer (a stream the client reset can also close with
      // NO_ERROR).
      const called = (!this.aborted && this.rstCode === constants.NGHTTP2_NO_ERROR) || budget.arrivedWhole(this);
      budget.release(this);
      if (slot !== undefined) slot.streams--;
      if (called) {
        if (slot !== undefined) {
          slot.proven = true;
          // Not a coarse clock: equal times would make the oldest connection, a busy one
          // among them, look the idlest.
          slot.lastCallMs = Date.now();
        }
      }
      afterClose(this);
    };
    // Before the listener that hands the stream to grpc-js: watched before any of its work.
    session.prependListener('stream', (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => {
      const timeout = grpcTimeoutMs(headers['grpc-timeout']);
      // A reset is the client's deadline only once the call has been open here for its whole
      // timeout (less a little for the clocks, never more than half of it): with
      // `grpc-timeout: 1m`, a call reset at once is still a reset.
      //
      // The call's age counts from when the loop last ran, not from now, when the server has
      // stalled (GC, CPU starvation): HEADERS that arrived during the stall are read only after
      // it, often in the same batch as the client's reset at its deadline, and would look younger
      // than they are.
      if (timeout !== undefined) this.noteDeadline(stream, timeout);
      if (slot !== undefined) slot.sentHeaders = true;
      if (stream.destroyed) {
        // Sent and reset in one read: closed before anyone could listen.
        afterClose(stream);
        return;
      }
      if (slot !== undefined) slot.streams++;
      if (!stream.readableEnded) {
        this.unfinished.set(stream, Date.now() + this.bounds.maxRequestReceiveMs);
        budget.open(stream);
        // Added before grpc-js' own (its 'stream' listener runs after this one): a chunk is
        // counted before grpc-js' decoder holds it.
        stream.on('data', budget.onData);
      }
      // `on`, not `once`: 'close' comes once per stream, and `once` wraps the listener in a new
      // bound function per call.
      stream.on('close', onStreamClose);
    });
  }

  /**
   * A stall counts (for arrivedBy) only when the loop spent most of it waiting for I/O, as
   * libuv measures it: the process was stopped or not scheduled while idle, outside its own
   * doing. A stall the loop spent running JavaScript (a flood of resets keeping it busy, which
   * a client can cause) earns no credit: otherwise a rapid reset with `grpc-timeout: 1m`
   * excused itself (5,000 calls on one connection).
   */
  private loopRan(): void {
    const now = performance.now();
    const idle = performance.eventLoopUtilization().idle;
    const idleMs = idle - this.loopIdleMs;
    this.loopIdleMs = idle;
    const lateMs = now - this.loopSeenMs - LOOP_TICK_MS;
    if (lateMs > LOOP_TICK_MS && idleMs >= lateMs / 2) {
      this.stallStartMs = this.loopSeenMs + LOOP_TICK_MS;
      this.stallEndMs = now;
      this.stalls++;
    }
    this.loopSeenMs = now;
  }

  /**
   * The earliest a stream read now may have arrived: now, unless the server has just stalled
   * (its LOOP_TICK_MS timer ran late, or has not run yet): then since the stall began. After a
   * SIGSTOP, libuv runs the late timer before it reads the sockets, so the stall is known by then;
   * during a long run of JavaScript, the timer has not run yet.
   */
  private arrivedBy(now: number): number {
    const notRunSince = Math.min(now, this.loopSeenMs + LOOP_TICK_MS);
    return now - this.stallEndMs <= 2 * LOOP_TICK_MS ? Math.min(notRunSince, this.stallStartMs) : notRunSince;
  }

  private noteDeadline(stream: ServerHttp2Stream, timeout: number): void {
    const now = performance.now();
    // Never less than MIN_DEADLINE_MS: a `grpc-timeout` of a millisecond or two excused a reset
    // made a moment later (a busy loop reads it after that), and a flood of such calls kept a
    // connection going 450 calls with a fresh allowance.
    const less = Math.max(MIN_DEADLINE_MS, timeout - Math.min(DEADLINE_SLACK_MS, timeout / 2));
    const from = this.arrivedBy(now);
    // A timer a little late is no stall: no credit, and no second entry per call.
    if (now - from <= LOOP_TICK_MS) {
      this.deadlines.set(stream, now + less);
      return;
    }
    this.deadlines.set(stream, from + less);
    this.uncreditedDeadlines.set(stream, now + less);
  }

  /**
   * The client's deadline had passed when it reset `stream`: by the server's reading of it, or
   * thanks to the credit of a stall, GRPC_MAX_RESET_BURST resets per connection and stall (a
   * client holds no more than GRPC_MAX_CONCURRENT_STREAMS calls at once, and without a cap a
   * client that keeps the server busy would earn credit for ever).
   */
  private atDeadline(stream: ServerHttp2Stream, resets: ConnectionResets): boolean {
    const deadline = this.deadlines.get(stream);
    const now = performance.now();
    if (deadline === undefined || now < deadline) return false;
    const uncredited = this.uncreditedDeadlines.get(stream);
    if (uncredited === undefined || now >= uncredited) return true;
    if (resets.stall !== this.stalls) {
      resets.stall = this.stalls;
      resets.stallCredits = this.bounds.resetBurst;
    }
    if (resets.stallCredits <= 0) return false;
    resets.stallCredits--;
    return true;
  }

  /** A fresh allowance, or what is left of the peer's if a connection of it was closed for resets. */
  private allowanceFor(peer: string | undefined): ResetAllowance {
    const left = peer === undefined ? undefined : this.floodedPeers.get(peer);
    return left ?? { tokens: this.bounds.resetBurst, lastMs: Date.now() };
  }

  /** A client's reset of a call not yet answered spends one of its connection's allowance. */
  private afterClose(stream: ServerHttp2Stream, session: Http2Session, resets: ConnectionResets): void {
    // Not reset by the client, or answered before it was (a reset with NO_ERROR after the
    // answer began), or the whole connection is going.
    if (stream.rstCode === constants.NGHTTP2_NO_ERROR && !stream.aborted) return;
    if (this.resetByUs.has(stream) || session.closed || session.destroyed) return;
    // A client that gives up when its own deadline passes (grpc-timeout; Envoy's 20 ms) keeps
    // its word: only a reset before the deadline it sent is the rapid-reset pattern.
    if (this.atDeadline(stream, resets)) return;
    const allowance = resets.allowance;
    const now = Date.now();
    allowance.tokens = Math.min(this.bounds.resetBurst, allowance.tokens + ((now - allowance.lastMs) * this.bounds.resetsPerSecond) / 1000);
    allowance.lastMs = now;
    allowance.tokens -= 1;
    if (allowance.tokens >= 0) return;
    const peer = session.socket?.remoteAddress;
    this.events.onResetFlood(peer);
    // The peer's next connections share what is left (nothing) until it fills again.
    if (peer !== undefined) this.floodedPeers.set(peer, allowance);
    // nghttp2 then drops the client's new streams unread, and the connection closes once the
    // calls in flight are answered.
    sendAway(session, 'rapid reset (GRPC_MAX_RESET_BURST, GRPC_MAX_RESETS_PER_SECOND)');
  }

  /**
   * The budget is full and `stream` has been arriving longest: it is reset. Its connection too
   * gets GOAWAY, and every other request still arriving on it is reset, when it held more than
   * an eighth of the budget or has had BUDGET_RESETS_BEFORE_GOAWAY calls reset so: nghttp2 then
   * drops the client's further streams and their DATA there unread, and calls whose request has
   * arrived are answered before it closes. Resetting streams one by one let a client open new
   * ones as fast as they went: each a call object made and dropped, and 25,600 of them took
   * the heap from 37 to 115 MB. A client's connection with one large request arriving slowly
   * (Envoy's) loses that call only.
   */
  private makeRoom(stream: ServerHttp2Stream, bytes: number): void {
    const session = stream.session;
    this.resetStream(stream, constants.NGHTTP2_ENHANCE_YOUR_CALM);
    if (session === undefined || session.closed || session.destroyed) return;
    const resets = (this.budgetResets.get(session) ?? 0) + 1;
    this.budgetResets.set(session, resets);
    if (resets < BUDGET_RESETS_BEFORE_GOAWAY && bytes + this.budget.sessionBytes(session) <= this.bounds.maxUnfinishedRequestBytes / 8) return;
    // The calls it has answered or is answering count as processed; the requests still arriving
    // on it are reset just below.
    sendAway(session, 'unfinished requests (GRPC_MAX_UNFINISHED_REQUEST_BYTES)', 2 ** 31 - 1);
    this.budget.dropSession(session);
  }

  private resetStream(stream: ServerHttp2Stream, code: number): void {
    this.resetByUs.add(stream);
    stream.close(code);
  }

  /** Resets every stream whose request is still incomplete past its deadline; closes slot holders. */
  private sweep(): void {
    const now = Date.now();
    for (const slots of this.slots) slots.sweep(now);
    this.forgetRefilledPeers(now);
    this.report(now);
    for (const [stream, deadline] of this.unfinished) {
      if (deadline > now) return;
      this.unfinished.delete(stream);
      // Its request arrived in time ('end' was emitted): the call only waits for its answer.
      if (stream.destroyed || stream.readableEnded) continue;
      this.resetStream(stream, constants.NGHTTP2_CANCEL);
    }
  }

  /** A peer whose allowance has filled again is like any other. */
  private forgetRefilledPeers(now: number): void {
    for (const [peer, a] of this.floodedPeers) {
      if (a.tokens + ((now - a.lastMs) * this.bounds.resetsPerSecond) / 1000 >= this.bounds.resetBurst) this.floodedPeers.delete(peer);
    }
  }

  private report(now: number): void {
    if (now - this.lastReportMs < REPORT_INTERVAL_MS) return;
    this.lastReportMs = now;
    const resets = this.budget.takeResets();
    if (resets > 0) this.events.onRequestBudgetFull(resets);
    let evicted = 0;
    for (const slots of this.slots) evicted += slots.takeEvicted();
    if (evicted > 0) this.events.onConnectionsEvicted(evicted);
  }
}

/**
 * Closes a connection the guard has given up on: GOAWAY, then close once its calls in flight are
 * answered. The code is NO_ERROR and the reason goes in the GOAWAY's debug data: on a GOAWAY with
 * an error code (ENHANCE_YOUR_CALM), node's HTTP/2 client destroys the session at once, and every
 * other call multiplexed on it (grpc-js shares one connection among a process's clients of an
 * address, as Envoy does among its requests) failed with RESOURCE_EXHAUSTED. Envoy and grpc-go
 * drain on any GOAWAY alike. Without `lastStreamId`, nghttp2 names the last stream it processed.
 */
function sendAway(session: Http2Session, reason: string, lastStreamId?: number): void {
  session.goaway(constants.NGHTTP2_NO_ERROR, lastStreamId, Buffer.from(`floodgate: ${reason}`, 'latin1'));
  session.close();
}

/** A connection that has had this many calls reset to make room in the budget gets GOAWAY (see makeRoom). */
const BUDGET_RESETS_BEFORE_GOAWAY = 10;

/** How often the guard notes that the event loop runs (arrivedBy); an unref'd timer, cheap. */
const LOOP_TICK_MS = 10;

/** The shortest time a call must have been open for its reset to be the client's deadline (Envoy's default timeout is 20 ms). */
const MIN_DEADLINE_MS = 5;

/** A client's clock and ours differ by the network's delay; a reset this close to its deadline is the deadline. */
const DEADLINE_SLACK_MS = 2;
