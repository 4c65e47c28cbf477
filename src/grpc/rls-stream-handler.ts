import { constants, type Http2Session, type IncomingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import { type PeerCertificate, TLSSocket } from 'node:tls';
import { status as GrpcStatus } from '@grpc/grpc-js';
import { errTypeOf, grpcStatusOf } from '../base/error-status';
import type { Logger } from '../base/log';
import type { ServiceMetrics } from '../metrics/metrics';
import { decodeRateLimitRequest } from '../rls/request-decoder';
import { encodeRateLimitResponseMessage } from '../rls/response-encoder';
import type { RateLimitHandler } from '../service/rate-limit-handler';
import type { RateLimitResponse } from '../service/types';
import { carriesSan } from './credentials';
import { grpcJsTimeoutMs } from './grpc-timeout';
import { MessageInflater } from './message-inflater';
import { FRAMED, RequestFramer, TOO_LARGE } from './request-framer';

// ShouldRateLimit served straight on the node:http2 streams grpc-js' server accepts (issue 29):
// the project's own codec on each side, and none of grpc-js' per-call objects (its call, its
// interceptor chain, metadata, decoder, the unary call wrapper), which made most of the tail.
// Sessions stay grpc-js' (keepalive, connection age and idle) and the connection guard's; other
// methods stay grpc-js' (http2-servers.ts routeStreams). What a client sees is what grpc-js'
// server answers, case by case: test/e2e/grpc-rls-handler-parity.test.ts runs both.

export const RLS_PATH = '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit';
const METHOD = 'ShouldRateLimit';

export interface RlsStreamDeps {
  readonly service: RateLimitHandler;
  readonly metrics: ServiceMetrics;
  readonly logger: Logger;
  /** Budget for a call that arrives without `grpc-timeout`. */
  readonly defaultDeadlineMs: number;
  /** GRPC_MAX_RECEIVE_MESSAGE_BYTES: a larger message is refused from its length prefix. */
  readonly maxReceiveMessageBytes: number;
  /** GRPC_CLIENT_TLS_SAN: with mTLS, the client certificate must carry this name. */
  readonly requiredClientSan?: string;
}

export type StreamHandler = (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => void;

// Built once: node:http2 copies what it sends, so every answer shares these.
const OK_HEADERS = Object.freeze({
  [constants.HTTP2_HEADER_STATUS]: 200,
  [constants.HTTP2_HEADER_CONTENT_TYPE]: 'application/grpc+proto',
  'grpc-accept-encoding': 'identity,deflate,gzip',
  'grpc-encoding': 'identity',
});
const OK_TRAILERS = Object.freeze({ 'grpc-status': '0', 'grpc-message': 'OK' });
const WAIT_FOR_TRAILERS = Object.freeze({ waitForTrailers: true });
const END_STREAM = Object.freeze({ endStream: true });
const UNSUPPORTED_MEDIA_TYPE = Object.freeze({ [constants.HTTP2_HEADER_STATUS]: constants.HTTP_STATUS_UNSUPPORTED_MEDIA_TYPE });

/** The 'wantTrailers' listener of every answered call (`this` is the stream): no closure per call. */
function sendOkTrailers(this: ServerHttp2Stream): void {
  this.sendTrailers(OK_TRAILERS);
}

/** As grpc-js: a stream error is followed by its close, which is all that matters here. */
function ignore(): void {}

/** The client reset the call, or the session went: nothing can be answered. */
function gone(stream: ServerHttp2Stream): boolean {
  return stream.destroyed || stream.closed;
}

/**
 * grpc-message is percent-encoded (the gRPC spec), with encodeURI as grpc-js does; a lone
 * surrogate, which encodeURI refuses, becomes U+FFFD.
 */
function percentEncoded(details: string): string {
  return encodeURI(details.toWellFormed());
}

/** A status and no message: one HEADERS frame with END_STREAM ("Trailers-Only"), as grpc-js sends it. */
function sendStatus(stream: ServerHttp2Stream, code: GrpcStatus, details: string): void {
  if (gone(stream)) return;
  stream.respond(
    {
      [constants.HTTP2_HEADER_STATUS]: 200,
      [constants.HTTP2_HEADER_CONTENT_TYPE]: 'application/grpc+proto',
      'grpc-status': String(code),
      'grpc-message': percentEncoded(details),
    },
    END_STREAM,
  );
}

/**
 * The SAN check reads the peer certificate once per connection (it cannot change within one:
 * HTTP/2 forbids renegotiation), not once per call as grpc-js' getAuthContext does.
 */
export function sanChecker(san: string): (stream: ServerHttp2Stream) => boolean {
  const checked = new WeakMap<Http2Session, boolean>();
  return (stream) => {
    const session = stream.session;
    if (session === undefined) return false;
    let ok = checked.get(session);
    if (ok === undefined) {
      const socket = session.socket;
      // null once the TLS handle is gone (the connection closing), whatever node's types say: no SAN.
      const certificate = socket instanceof TLSSocket && socket.authorized ? (socket.getPeerCertificate() as PeerCertificate | null) : null;
      ok = carriesSan(certificate?.subjectaltname, san);
      checked.set(session, ok);
    }
    return ok;
  };
}

/**
 * Compressed messages inflated at once, per server: each may hold up to the message bound while
 * it inflates (see message-inflater.ts), so at most this many bounds at a time.
 */
const INFLATE_CONCURRENCY = 2;

/** What every call of one server shares. */
interface Shared extends RlsStreamDeps {
  readonly hasSan: ((stream: ServerHttp2Stream) => boolean) | undefined;
  readonly inflater: MessageInflater;
}

/** The 'stream' listener for RLS_PATH: one RlsCall per stream. */
export function rlsStreamHandler(deps: RlsStreamDeps): StreamHandler {
  const shared: Shared = {
    ...deps,
    hasSan: deps.requiredClientSan === undefined ? undefined : sanChecker(deps.requiredClientSan),
    inflater: new MessageInflater(INFLATE_CONCURRENCY),
  };
  return (stream, headers) => {
    stream.on('error', ignore);
    const contentType = headers[constants.HTTP2_HEADER_CONTENT_TYPE];
    if (typeof contentType !== 'string' || !contentType.startsWith('application/grpc')) {
      // As grpc-js: not gRPC, so no gRPC status either.
      if (!gone(stream)) stream.respond(UNSUPPORTED_MEDIA_TYPE, END_STREAM);
      stream.resume();
      return;
    }
    const call = new RlsCall(stream as CallStream, headers, shared);
    call.start();
  };
}

/** The deadline timer's callback (no closure per call). */
function deadlineReached(call: RlsCall): void {
  call.expire();
}

/**
 * The call a stream serves, until the stream closes. node:http2 keeps a closed stream reachable
 * across scavenges, until the next full GC (its native handle holds it), so whatever the stream
 * references then is copied, promoted and left for a mark-compact. A closure per call on its
 * listeners made that the whole call: its headers, framer and message, about 2 KB a call
 * promoted, most of the old-generation growth that paced the mark-compacts (issue 29). The
 * listeners below are shared, `this` being the stream, and the stream lets go of its call at
 * its close: what stays reachable is node's own stream objects.
 */
const CALL = Symbol('floodgate.rlsCall');
type CallStream = ServerHttp2Stream & { [CALL]: RlsCall | undefined };

function onCallData(this: CallStream, chunk: Buffer): void {
  this[CALL]?.onData(chunk);
}

function onCallEnd(this: CallStream): void {
  this[CALL]?.onEnd();
}

function onCallClose(this: CallStream): void {
  const call = this[CALL];
  if (call === undefined) return;
  this[CALL] = undefined;
  // A call the client resets gives its timer back at once, not at its deadline.
  call.stopTimer();
}

/** One ShouldRateLimit call, from its HEADERS to its answer. */
class RlsCall {
  private readonly framer: RequestFramer;
  private readonly started = performance.now();
  private deadline = 0;
  private timer: NodeJS.Timeout | undefined;
  /** An answer (or a refusal) has been sent, or is no longer wanted. */
  private answered = false;

  constructor(
    private readonly stream: CallStream,
    private readonly headers: IncomingHttpHeaders,
    private readonly shared: Shared,
  ) {
    this.framer = new RequestFramer(shared.maxReceiveMessageBytes);
  }

  start(): void {
    const ms = grpcJsTimeoutMs(this.headers['grpc-timeout']);
    if (ms === 'absent') {
      this.deadline = Date.now() + this.shared.defaultDeadlineMs;
    } else {
      if (ms === 'invalid') {
        this.refuse(GrpcStatus.INTERNAL, `Invalid grpc-timeout value "${String(this.headers['grpc-timeout'])}"`);
        return;
      }
      // As grpc-js: whole milliseconds, `| 0` (a value past 2^31-1 wraps, a negative one is a
      // deadline already passed), and the call answered DEADLINE_EXCEEDED when they have passed.
      // Never below 1 ms for the timer: node would print a warning per call otherwise.
      this.deadline = Date.now() + ms;
      this.timer = setTimeout(deadlineReached, ms > 1 ? ms : 1, this);
    }
    const stream = this.stream;
    stream[CALL] = this;
    stream.on('close', onCallClose);
    stream.on('data', onCallData);
    stream.on('end', onCallEnd);
  }

  expire(): void {
    this.timer = undefined;
    this.refuse(GrpcStatus.DEADLINE_EXCEEDED, 'Deadline exceeded');
  }

  stopTimer(): void {
    if (this.timer === undefined) return;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  /**
   * Answers with a status, once. Data still arriving is read and dropped (the stream keeps
   * flowing), so that the client's flow-control window is not left full.
   */
  private refuse(code: GrpcStatus, details: string): void {
    if (this.answered) return;
    this.answered = true;
    this.stopTimer();
    sendStatus(this.stream, code, details);
    this.stream.resume();
  }

  onData(chunk: Buffer): void {
    if (this.answered) return;
    const outcome = this.framer.push(chunk);
    if (outcome === FRAMED) return;
    if (outcome === TOO_LARGE) {
      this.refuse(
        GrpcStatus.RESOURCE_EXHAUSTED,
        `Received message larger than max (${this.framer.refusedBytes} vs ${this.shared.maxReceiveMessageBytes})`,
      );
      return;
    }
    this.refuse(GrpcStatus.UNIMPLEMENTED, `Received a second request message for server streaming method ${RLS_PATH}`);
  }

  onEnd(): void {
    if (this.answered) return;
    const message = this.framer.message;
    if (message === undefined) {
      this.refuse(GrpcStatus.UNIMPLEMENTED, `Received no request message for server streaming method ${RLS_PATH}`);
      return;
    }
    if (!this.framer.compressed) {
      this.serve(message);
      return;
    }
    const encoding = this.headers['grpc-encoding'] ?? 'identity';
    if (encoding === 'identity') {
      this.serve(message);
    } else if (encoding === 'gzip' || encoding === 'deflate') {
      // `inflated` catches its own errors.
      void this.inflated(encoding, message);
    } else {
      this.refuse(GrpcStatus.UNIMPLEMENTED, `Received message compressed with unsupported encoding "${String(encoding)}"`);
    }
  }

  /**
   * As grpc-js: gzip and deflate are inflated, at most GRPC_MAX_RECEIVE_MESSAGE_BYTES of them,
   * on node's thread pool, a few at a time (message-inflater.ts). The call may have been answered
   * meanwhile (its deadline) or reset: then nothing more is done, and a message still waiting its
   * turn is not inflated at all.
   */
  private async inflated(encoding: 'gzip' | 'deflate', message: Buffer): Promise<void> {
    const max = this.shared.maxReceiveMessageBytes;
    let bytes: Buffer | undefined;
    try {
      bytes = await this.shared.inflater.inflate(encoding, message, max, () => !this.answered && !gone(this.stream));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE') {
        this.refuse(GrpcStatus.RESOURCE_EXHAUSTED, `Received message that decompresses to a size larger than ${max}`);
      } else {
        this.refuse(GrpcStatus.INTERNAL, 'Failed to decompress message');
      }
      return;
    }
    if (bytes === undefined || this.answered || gone(this.stream)) return;
    this.serve(bytes);
  }

  /** The request's message, whole and inflated: checked, decoded and handed to the service. */
  private serve(bytes: Buffer): void {
    const { hasSan, requiredClientSan } = this.shared;
    if (hasSan !== undefined && !hasSan(this.stream)) {
      this.refuse(GrpcStatus.UNAUTHENTICATED, `client certificate does not carry the subject alternative name '${requiredClientSan}'`);
      return;
    }
    let request;
    try {
      request = decodeRateLimitRequest(bytes);
    } catch (err) {
      this.fail(err);
      return;
    }
    // `answer` catches its own errors (an answer that cannot be encoded is INTERNAL with its message).
    this.shared.service.shouldRateLimit(request, this.deadline, this.headers).then(
      (response) => this.answer(response),
      (err: unknown) => this.fail(err),
    );
  }

  private answer(response: RateLimitResponse): void {
    const { metrics } = this.shared;
    const stream = this.stream;
    if (this.answered || gone(stream)) {
      metrics.requestDone(METHOD, (performance.now() - this.started) / 1000);
      return;
    }
    let message: Buffer;
    try {
      message = encodeRateLimitResponseMessage(response);
    } catch (err) {
      this.fail(err);
      return;
    }
    metrics.requestDone(METHOD, (performance.now() - this.started) / 1000);
    this.answered = true;
    this.stopTimer();
    stream.respond(OK_HEADERS, WAIT_FOR_TRAILERS);
    stream.on('wantTrailers', sendOkTrailers);
    stream.end(message);
  }

  /** As grpc-server.ts: counted and logged, unless the caller has gone (or its deadline was answered). */
  private fail(err: unknown): void {
    const { metrics, logger } = this.shared;
    metrics.requestDone(METHOD, (performance.now() - this.started) / 1000);
    if (this.answered || gone(this.stream)) return;
    metrics.shouldRateLimitError(errTypeOf(err));
    const code = grpcStatusOf(err);
    if (code === GrpcStatus.INTERNAL) logger.error('ShouldRateLimit failed', { error: String(err) });
    else logger.debug('ShouldRateLimit refused', { error: String(err) });
    this.refuse(code, err instanceof Error ? err.message : String(err));
  }
}
