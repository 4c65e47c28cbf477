import { constants, type Http2Session } from 'node:http2';
import type { Socket } from 'node:net';

/** Where a socket keeps its slot, for its session to find (see `attach`). */
const SLOT = Symbol('floodgate.slot');
type Tagged = Socket & { [SLOT]?: Slot };

/** One connection to a gRPC port, as its slots see it. */
export interface Slot {
  readonly socket: Socket;
  /** The peer's address ('' for a unix socket). */
  readonly peer: string;
  readonly openedMs: number;
  /** When a call on it last finished, or when it opened. */
  lastCallMs: number;
  /** Some call on it has finished, or some request arrived whole: it is a client, not something holding a slot. */
  proven: boolean;
  /** It has opened a stream (sent HEADERS): a slot holder that sends only the preface has not. */
  sentHeaders: boolean;
  /** Its streams open now: a connection with some is closed with GOAWAY, never cut. */
  streams: number;
  session: Http2Session | undefined;
}

/** The largest HTTP/2 stream id. */
const LAST_STREAM_ID = 2 ** 31 - 1;

/** How long a proven connection that was made room for may finish its calls in flight. */
const EVICTION_GRACE_MS = 2000;

/**
 * The connection slots of one gRPC port (GRPC_MAX_CONNECTIONS; issue 26, finding 2). The cap
 * exists so that connections cannot exhaust memory; it must not become the way to lock everyone
 * out, as 256 raw connections sending only the HTTP/2 preface did (a fresh client, and the
 * kubelet's gRPC probe, which connects anew for each check, got UNAVAILABLE). So a full port
 * never refuses a new connection: it makes room by closing one it holds, chosen so that
 * clients that work keep theirs:
 *
 * 1. a connection that has not opened a stream, from the peer address that holds the most of
 *    those, its oldest (a slot holder sends only the preface; a fresh client its first call);
 * 2. else one on which no call has finished nor any request arrived whole, the same way;
 * 3. else the connection idle longest since its last finished call.
 *
 * A connection with streams open gets GOAWAY (its calls so far are answered) and
 * EVICTION_GRACE_MS for them, never a cut. Connections in that grace are bounded too
 * (a quarter of GRPC_MAX_CONNECTIONS, the oldest cut past it): otherwise a client that proves
 * and replaces connections quickly keeps sockets beyond the slots until net.Server's backstop
 * (twice the slots) refuses new connections before the slots see them.
 *
 * A connection with no finished call GRPC_MAX_FIRST_CALL_TIME after it opened is closed too.
 */
export class ConnectionSlots {
  /** Insertion order is the order the connections opened. */
  private readonly slots = new Map<Socket, Slot>();
  /** Connections closed gracefully whose sockets are still open; insertion order is eviction order. */
  private readonly inGrace = new Set<Socket>();
  private evicted = 0;

  constructor(
    private readonly maxConnections: number,
    private readonly maxFirstCallMs: number,
  ) {}

  /** A new connection: takes a slot, making room first when the port is full. */
  admit(socket: Socket, nowMs: number): void {
    if (this.slots.size >= this.maxConnections) {
      const victim = this.victim();
      if (victim !== undefined) this.evict(victim);
    }
    const slot: Slot = {
      socket,
      peer: socket.remoteAddress ?? '',
      openedMs: nowMs,
      lastCallMs: nowMs,
      proven: false,
      sentHeaders: false,
      streams: 0,
      session: undefined,
    };
    this.slots.set(socket, slot);
    (socket as Tagged)[SLOT] = slot;
    socket.once('close', () => this.forget(slot));
  }

  /**
   * The slot of `session`'s connection. node:http2 hands out a proxy of its socket, which
   * forwards property reads to the socket: the raw one for plaintext, the TLS socket over it
   * (whose `_parent` is the raw one) with TLS.
   */
  attach(session: Http2Session): Slot | undefined {
    const socket = session.socket as (Tagged & { _parent?: Tagged }) | undefined;
    const slot = socket?.[SLOT] ?? socket?._parent?.[SLOT];
    if (slot !== undefined) slot.session = session;
    return slot;
  }

  /** Closes the connections still without a finished call past GRPC_MAX_FIRST_CALL_TIME. */
  sweep(nowMs: number): void {
    for (const slot of this.slots.values()) {
      if (nowMs - slot.openedMs < this.maxFirstCallMs) return;
      if (!slot.proven) this.evict(slot);
    }
  }

  /** How many connections were closed to make room, or for want of a first call, since the last call. */
  takeEvicted(): number {
    const n = this.evicted;
    this.evicted = 0;
    return n;
  }

  get size(): number {
    return this.slots.size;
  }

  private forget(slot: Slot): void {
    this.slots.delete(slot.socket);
  }

  private evict(slot: Slot): void {
    this.forget(slot);
    this.evicted++;
    const session = slot.session;
    const graceful = slot.proven || slot.streams > 0;
    if (!graceful || session === undefined || session.destroyed) {
      slot.socket.destroy();
      return;
    }
    try {
      // A proven connection's streams so far all count as processed: its calls in flight are
      // answered, as grpc-js does at GRPC_MAX_CONNECTION_AGE (a last stream id of 0 fails them
      // UNAVAILABLE). An unproven one's, those nghttp2 has processed (node's default).
      if (slot.proven) session.goaway(constants.NGHTTP2_NO_ERROR, LAST_STREAM_ID);
      else session.goaway(constants.NGHTTP2_NO_ERROR);
      session.close();
    } catch {
      slot.socket.destroy();
      return;
    }
    this.holdInGrace(slot.socket);
  }

  private holdInGrace(socket: Socket): void {
    this.inGrace.add(socket);
    socket.once('close', () => this.inGrace.delete(socket));
    setTimeout(() => socket.destroy(), EVICTION_GRACE_MS).unref();
    const most = Math.max(1, Math.floor(this.maxConnections / 4));
    for (const oldest of this.inGrace) {
      if (this.inGrace.size <= most) break;
      this.inGrace.delete(oldest);
      oldest.destroy();
    }
  }

  /** The connection to close to make room (see the class comment). */
  private victim(): Slot | undefined {
    let silent: Map<string, { count: number; oldest: Slot }> | undefined;
    let unproven: Map<string, { count: number; oldest: Slot }> | undefined;
    let idlest: Slot | undefined;
    for (const slot of this.slots.values()) {
      if (slot.proven) {
        if (idlest === undefined || slot.lastCallMs < idlest.lastCallMs) idlest = slot;
      } else if (!slot.sentHeaders) {
        silent = countByPeer(silent, slot);
      } else {
        unproven = countByPeer(unproven, slot);
      }
    }
    return mostByPeer(silent) ?? mostByPeer(unproven) ?? idlest;
  }
}

function countByPeer(map: Map<string, { count: number; oldest: Slot }> | undefined, slot: Slot): Map<string, { count: number; oldest: Slot }> {
  const m = map ?? new Map<string, { count: number; oldest: Slot }>();
  const seen = m.get(slot.peer);
  if (seen === undefined) m.set(slot.peer, { count: 1, oldest: slot });
  else seen.count++;
  return m;
}

/** The oldest connection of the peer that holds the most in `map`. */
function mostByPeer(map: Map<string, { count: number; oldest: Slot }> | undefined): Slot | undefined {
  if (map === undefined) return undefined;
  let pick: { count: number; oldest: Slot } | undefined;
  for (const p of map.values()) if (pick === undefined || p.count > pick.count) pick = p;
  return pick?.oldest;
}
