// Raw HTTP/2 attacks on the gRPC port (issue 18, findings 3 and 10), with node:http2 so that
// the client can do what no gRPC library does: leave a message unfinished, or reset a call
// right after sending it. Loopback only; every loop bounded in count and time.
import * as http2 from 'node:http2';
import { connect as netConnect, type Socket } from 'node:net';

const METHOD_PATH = '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit';
const HEADERS = {
  ':method': 'POST',
  ':path': METHOD_PATH,
  'content-type': 'application/grpc',
  te: 'trailers',
};

/** A gRPC length-prefixed message header: not compressed, `length` bytes follow. */
function messagePrefix(length: number): Buffer {
  const b = Buffer.alloc(5);
  b.writeUInt32BE(length, 1);
  return b;
}

function connect(port: number, host = '127.0.0.1', timeoutMs = 10_000): Promise<http2.ClientHttp2Session> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(`http://${host}:${port}`);
    const timer = setTimeout(() => {
      session.destroy();
      reject(new Error(`no SETTINGS from the server within ${timeoutMs} ms`));
    }, timeoutMs);
    session.once('close', () => clearTimeout(timer));
    session.once('remoteSettings', () => clearTimeout(timer));
    // Once the server's SETTINGS are in (its MAX_CONCURRENT_STREAMS among them): until then
    // node assumes 100.
    session.once('remoteSettings', () => resolve(session));
    session.once('error', reject);
    session.once('close', () => reject(new Error('closed before SETTINGS')));
  });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export interface PartialCallsOptions {
  readonly port: number;
  readonly connections: number;
  readonly streamsPerConnection: number;
  /** The message length the prefix declares... */
  readonly declaredBytes: number;
  /** ...and the bytes actually sent (fewer), never followed by END_STREAM. */
  readonly sentBytes: number;
  /** How long the streams are held open before the client closes everything (at most, with `holdUntil`). */
  readonly holdMs: number;
  /**
   * Lets go early, once this holds (checked every 100 ms) and `minHoldMs` passed: a bound in
   * time that a busy machine may need, without making a quiet one wait for it.
   */
  readonly holdUntil?: (result: PartialCallsResult) => boolean;
  readonly minHoldMs?: number;
  /** Called once all streams were opened and written, and then every second while held. */
  readonly onTick?: (elapsedMs: number) => void;
  /**
   * Make one whole call on each connection first, so that it may open GRPC_MAX_CONCURRENT_STREAMS
   * rather than the 10 a connection starts with (issue 26).
   */
  readonly callFirst?: boolean;
}

export interface PartialCallsResult {
  /** Streams the client opened (Node's client opens no more than the server's SETTINGS allow). */
  opened: number;
  /** Streams the server closed (RST_STREAM, or an answer) before the client let go. */
  closedByServer: number;
  /** Connections the server closed or refused before the client let go. */
  connectionsClosedByServer: number;
  /** Connections that never came up (refused at once). */
  connectionsRefused: number;
  /** The server's SETTINGS_MAX_CONCURRENT_STREAMS, as the first connection saw it. */
  maxConcurrentStreams: number | undefined;
  /** Milliseconds from the first stream to the last one the server closed (0 if none). */
  lastCloseMs: number;
}

/**
 * Opens `connections` × `streamsPerConnection` ShouldRateLimit calls, each sending `sentBytes` of
 * a `declaredBytes` message and never finishing it (finding 3), holds them for `holdMs`, then
 * closes everything. A stream beyond the server's SETTINGS_MAX_CONCURRENT_STREAMS is not opened
 * (its bytes would only pile up in this process): the server's bound is reported instead.
 */
export async function partialCalls(o: PartialCallsOptions): Promise<PartialCallsResult> {
  const result: PartialCallsResult = {
    opened: 0,
    closedByServer: 0,
    connectionsClosedByServer: 0,
    connectionsRefused: 0,
    maxConcurrentStreams: undefined,
    lastCloseMs: 0,
  };
  const sessions: http2.ClientHttp2Session[] = [];
  let letGo = false;
  const t0 = Date.now();
  for (let c = 0; c < o.connections; c++) {
    let session: http2.ClientHttp2Session;
    try {
      session = await connect(o.port);
    } catch {
      result.connectionsRefused++;
      continue;
    }
    sessions.push(session);
    session.on('error', () => {});
    session.once('close', () => {
      if (!letGo) result.connectionsClosedByServer++;
    });
    if (o.callFirst) await firstCall(session, messagePrefix(0));
    openPartialStreams(session, o, result, () => {
      if (letGo) return;
      result.closedByServer++;
      result.lastCloseMs = Date.now() - t0;
    });
  }
  await holdPartialCalls(o, result, t0);
  letGo = true;
  for (const s of sessions) s.destroy();
  return result;
}

/** Opens as many of `o.streamsPerConnection` partial calls on `session` as its SETTINGS allow. */
function openPartialStreams(session: http2.ClientHttp2Session, o: PartialCallsOptions, result: PartialCallsResult, onClose: () => void): void {
  const payload = Buffer.concat([messagePrefix(o.declaredBytes), Buffer.alloc(o.sentBytes, 0x61)]);
  const allowed = Math.min(o.streamsPerConnection, session.remoteSettings.maxConcurrentStreams ?? o.streamsPerConnection);
  result.maxConcurrentStreams ??= session.remoteSettings.maxConcurrentStreams;
  for (let s = 0; s < allowed && !session.destroyed; s++) {
    const stream = session.request(HEADERS, { endStream: false });
    result.opened++;
    stream.on('error', () => {});
    stream.on('data', () => {});
    stream.once('close', onClose);
    stream.write(payload);
  }
}

/** Holds the partial calls for `o.holdMs`, or until `o.holdUntil`, ticking about once a second. */
async function holdPartialCalls(o: PartialCallsOptions, result: PartialCallsResult, t0: number): Promise<void> {
  o.onTick?.(Date.now() - t0);
  const until = t0 + o.holdMs;
  const done = (): boolean => o.holdUntil !== undefined && Date.now() >= t0 + (o.minHoldMs ?? 0) && o.holdUntil(result);
  let lastTick = Date.now();
  while (Date.now() < until && !done()) {
    await sleep(Math.min(o.holdUntil ? 100 : 1000, until - Date.now()));
    if (o.holdUntil === undefined || Date.now() - lastTick >= 1000) {
      lastTick = Date.now();
      o.onTick?.(Date.now() - t0);
    }
  }
}

export interface RapidResetOptions {
  readonly port: number;
  /** The calls to send and reset on one connection (fewer if the server closes it). */
  readonly calls: number;
  /** One complete ShouldRateLimit request message (protobuf bytes). */
  readonly request: Buffer;
  readonly timeoutMs: number;
  /** Extra request headers on every call (issue 26: `grpc-timeout: 1M`, a deadline far ahead). */
  readonly headers?: Readonly<Record<string, string>>;
  /** Reset each call after its HEADERS, before its message is sent (issue 26, finding 6). */
  readonly resetBeforeMessage?: boolean;
  /** Reset from the start, with no whole call answered first (the connection stays unproven for the slots). */
  readonly noFirstCall?: boolean;
  /**
   * Wait for a PING's answer after each reset: the server has read every call before the next
   * one comes, so what it processed is what its guard counted, whatever the machine's speed.
   */
  readonly oneAtATime?: boolean;
}

export interface RapidResetResult {
  /** Calls sent and reset before the server closed the connection (or all of them). */
  resets: number;
  /** The server sent GOAWAY or closed the connection. */
  closedByServer: boolean;
  /** The GOAWAY's error code, if one came. */
  goawayCode: number | undefined;
  /** The last stream the GOAWAY says the server processed: about twice the calls it took. */
  goawayLastStreamId: number | undefined;
  /** The GOAWAY's debug data, if one came: floodgate's guard names its reason there. */
  goawayReason: string | undefined;
}

/**
 * The server closed the connection for its resets: floodgate's guard (GOAWAY NO_ERROR, the
 * reason in its debug data, so that node clients finish their other calls) or nghttp2's own
 * flood limit (INTERNAL_ERROR).
 */
export function closedForResets(r: RapidResetResult): boolean {
  if (r.goawayCode === http2.constants.NGHTTP2_INTERNAL_ERROR) return true;
  return r.goawayCode === http2.constants.NGHTTP2_NO_ERROR && (r.goawayReason ?? '').includes('floodgate: rapid reset');
}

/**
 * One whole call, answered: the connection is proven (a client, not a slot holder), which the
 * server's connection slots and reset allowance tell apart (issue 26). Bounded: 5 s.
 */
async function firstCall(session: http2.ClientHttp2Session, message: Buffer): Promise<void> {
  const answered = new Promise<void>((resolve) => {
    const stream = session.request(HEADERS);
    stream.on('error', () => resolve());
    stream.once('close', () => resolve());
    stream.resume();
    stream.end(message);
  });
  await Promise.race([answered, sleep(5000)]);
}

/**
 * Finding 10: on one connection, sends a complete call (HEADERS, the message, END_STREAM) and
 * resets it with RST_STREAM(CANCEL) at once, `calls` times, without waiting for answers: the
 * "rapid reset" pattern. Stops when the server closes the connection.
 */
export async function rapidReset(o: RapidResetOptions): Promise<RapidResetResult> {
  const session = await connect(o.port);
  const result: RapidResetResult = {
    resets: 0,
    closedByServer: false,
    goawayCode: undefined,
    goawayLastStreamId: undefined,
    goawayReason: undefined,
  };
  session.on('error', () => {});
  session.once('goaway', (code: number, lastStreamId: number, data?: Buffer) => {
    result.closedByServer = true;
    result.goawayCode = code;
    result.goawayLastStreamId = lastStreamId;
    result.goawayReason = data?.toString('latin1');
  });
  const closed = new Promise<void>((resolve) => session.once('close', () => resolve()));
  session.once('close', () => (result.closedByServer = true));
  const message = Buffer.concat([messagePrefix(o.request.length), o.request]);
  const headers = { ...HEADERS, ...o.headers };
  if (!o.noFirstCall) await firstCall(session, message);
  const until = Date.now() + o.timeoutMs;
  for (let i = 0; i < o.calls && !result.closedByServer && !session.destroyed && Date.now() < until; i++) {
    let stream: http2.ClientHttp2Stream;
    try {
      stream = session.request(headers, { endStream: false });
    } catch {
      break;
    }
    stream.on('error', () => {});
    if (!o.resetBeforeMessage) stream.end(message);
    stream.close(http2.constants.NGHTTP2_CANCEL);
    result.resets++;
    await pace(session, i, o.oneAtATime === true);
  }
  // Whatever the server still does about it (a GOAWAY in flight) arrives within this time.
  await Promise.race([closed, sleep(1000)]);
  session.destroy();
  return result;
}

/** Between two calls of `rapidReset`: a PING's round trip, or every 50 calls a turn of the event loop. */
async function pace(session: http2.ClientHttp2Session, i: number, oneAtATime: boolean): Promise<void> {
  if (oneAtATime) {
    await new Promise<void>((resolve) => {
      if (session.destroyed || !session.ping(() => resolve())) resolve();
    });
    return;
  }
  // Let the frames go out in batches, as a real attacker's socket writes would.
  if (i % 50 === 49) await new Promise((resolve) => setImmediate(resolve));
}

/** The HTTP/2 client connection preface and an empty SETTINGS frame: all a slot-holder sends. */
const PREFACE_AND_SETTINGS = Buffer.concat([
  Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1'),
  Buffer.from([0, 0, 0, 0x04, 0, 0, 0, 0, 0]),
]);

export interface SlotHoldersOptions {
  readonly port: number;
  /** Raw TCP connections kept open at once; each one closed by the server is opened again. */
  readonly connections: number;
  readonly holdMs: number;
  /** Called every second while held, after the first `connections` were opened. */
  readonly onTick?: (elapsedMs: number) => Promise<void> | void;
  /** Let go before `holdMs` once this holds (checked every 100 ms). */
  readonly holdUntil?: (r: SlotHoldersResult) => boolean;
  /** The address to connect from (a loopback one: 127.0.0.2 is another peer than 127.0.0.1). */
  readonly localAddress?: string;
  /** How long to wait before opening a closed connection again; 10 ms unless told. */
  readonly reopenDelayMs?: number;
}

export interface SlotHoldersResult {
  /** Connections opened in all (the first ones and every reopening). */
  opened: number;
  /** Connections the server closed or refused while held. */
  closedByServer: number;
}

/**
 * Issue 26, finding 2: `connections` raw TCP connections that send only the HTTP/2 preface and an
 * empty SETTINGS frame, each opened again when the server closes it, for `holdMs`: an attempt
 * to hold every one of the server's connection slots. Loopback only; bounded in time and count
 * (at most 100 reopenings a connection).
 */
export async function holdConnectionSlots(o: SlotHoldersOptions): Promise<SlotHoldersResult> {
  const result: SlotHoldersResult = { opened: 0, closedByServer: 0 };
  const sockets = new Set<Socket>();
  const until = Date.now() + o.holdMs;
  const maxOpened = o.connections * 100;
  let letGo = false;
  const open = (): void => {
    if (letGo || Date.now() >= until || result.opened >= maxOpened) return;
    result.opened++;
    const s = netConnect({ host: '127.0.0.1', port: o.port, ...(o.localAddress !== undefined ? { localAddress: o.localAddress } : {}) });
    sockets.add(s);
    s.on('error', () => {});
    s.on('data', () => {});
    s.once('connect', () => s.write(PREFACE_AND_SETTINGS));
    s.once('close', () => {
      sockets.delete(s);
      if (letGo) return;
      result.closedByServer++;
      // Not at once: a refused connection would otherwise spin.
      setTimeout(open, o.reopenDelayMs ?? 10);
    });
  };
  for (let i = 0; i < o.connections; i++) open();
  const t0 = Date.now();
  let lastTick = t0;
  while (Date.now() < until && !(o.holdUntil?.(result) ?? false)) {
    await sleep(Math.min(o.holdUntil ? 100 : 1000, until - Date.now()));
    if (Date.now() - lastTick < 1000 && o.holdUntil) continue;
    lastTick = Date.now();
    await o.onTick?.(Date.now() - t0);
  }
  letGo = true;
  for (const s of sockets) s.destroy();
  return result;
}
