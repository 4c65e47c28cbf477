import type { Socket } from 'node:net';

/** How many connections one HTTP port holds (HTTP_MAX_CONNECTIONS, HTTP_MAX_CONNECTIONS_PER_PEER). */
export interface SlotBounds {
  readonly maxConnections: number;
  readonly maxPerPeer: number;
}

/** What the port knows of one connection. */
interface Slot {
  readonly peer: string;
  /**
   * Requests read whole and not yet answered out (several when a client pipelines): while the
   * server owes it an answer the connection is never evicted.
   */
  owed: number;
}

/**
 * The connection slots of one HTTP port. A slow or idle connection must not keep a fresh one
 * out: when the new connection's peer holds its share, that peer's connection waiting longest
 * without a whole request (slow headers, a slow body, idle keep-alive) is closed to make room;
 * when the port is full, the same is done to the peer holding most connections. Only when
 * every candidate is answering a request is the new connection refused; an answer is produced
 * within the route's own deadlines and must then be written out within HTTP_REQUEST_TIMEOUT
 * (http-listener.ts closes the connection otherwise), so no connection stays busy for long.
 * So a client with thousands of slow connections cannot lock out the kubelet's probe or a
 * fresh client: from another address it is never the one evicted, and from the attacker's own
 * address it is evicted only after its peer opened a share's worth of newer connections (512 by
 * default) before the server read its request.
 */
export class ConnectionSlots {
  /** Every connection, least recently admitted or answered first (Map order). */
  private readonly slots = new Map<Socket, Slot>();
  /** The same per peer address, in the same order. */
  private readonly byPeer = new Map<string, Map<Socket, Slot>>();
  private evictedCount = 0;

  constructor(private readonly bounds: SlotBounds) {}

  /** Connections held now. */
  get size(): number {
    return this.slots.size;
  }

  /** Connections closed so far to make room for a newer one. */
  get evicted(): number {
    return this.evictedCount;
  }

  /** Takes a slot for `socket`, closing a waiting one if needed; false when refused (it is then destroyed). */
  admit(socket: Socket): boolean {
    const peer = socket.remoteAddress ?? '';
    const own = this.byPeer.get(peer);
    if (own !== undefined && own.size >= this.bounds.maxPerPeer && !this.evictFrom(own)) return this.refuse(socket);
    if (this.slots.size >= this.bounds.maxConnections && !this.evictFrom(this.largestPeer()) && !this.evictFrom(this.slots)) {
      return this.refuse(socket);
    }
    const slot: Slot = { peer, owed: 0 };
    this.slots.set(socket, slot);
    let peerSlots = this.byPeer.get(peer);
    if (peerSlots === undefined) this.byPeer.set(peer, (peerSlots = new Map<Socket, Slot>()));
    peerSlots.set(socket, slot);
    socket.once('close', () => this.release(socket));
    return true;
  }

  /** A request of `socket`'s arrived whole: it is answered, not evicted, until its `answered`. */
  busy(socket: Socket): void {
    const slot = this.slots.get(socket);
    if (slot !== undefined) slot.owed++;
  }

  /** An answer of `socket`'s is out: with none owed any more, it waits again, as the newest. */
  answered(socket: Socket): void {
    const slot = this.slots.get(socket);
    if (slot === undefined) return;
    slot.owed = Math.max(0, slot.owed - 1);
    if (slot.owed > 0) return;
    this.slots.delete(socket);
    this.slots.set(socket, slot);
    const peerSlots = this.byPeer.get(slot.peer);
    peerSlots?.delete(socket);
    peerSlots?.set(socket, slot);
  }

  /** The connections of the peer holding most (a scan of the peers, only when the port is full). */
  private largestPeer(): Map<Socket, Slot> {
    let largest = this.slots;
    let most = 0;
    for (const peerSlots of this.byPeer.values()) {
      if (peerSlots.size > most) {
        most = peerSlots.size;
        largest = peerSlots;
      }
    }
    return largest;
  }

  private evictFrom(candidates: Map<Socket, Slot>): boolean {
    for (const [socket, slot] of candidates) {
      if (slot.owed > 0) continue;
      this.release(socket);
      socket.destroy();
      this.evictedCount++;
      return true;
    }
    return false;
  }

  private refuse(socket: Socket): false {
    socket.destroy();
    return false;
  }

  private release(socket: Socket): void {
    const slot = this.slots.get(socket);
    if (slot === undefined) return;
    this.slots.delete(socket);
    const peerSlots = this.byPeer.get(slot.peer);
    peerSlots?.delete(socket);
    if (peerSlots?.size === 0) this.byPeer.delete(slot.peer);
  }
}
