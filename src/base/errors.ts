/**
 * The error family of floodgate. Each class has a stable code; the transport layers map codes
 * to gRPC status and HTTP status in one place each (src/base/error-status.ts).
 */
export type ErrorCode =
  'INVALID_REQUEST' | 'TOO_LARGE' | 'BACKEND_UNAVAILABLE' | 'DEADLINE_EXCEEDED' | 'NOT_READY' | 'CONFIG' | 'SETTINGS' | 'INTERNAL';

export abstract class FloodgateError extends Error {
  abstract readonly code: ErrorCode;
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** The request is malformed or too large; the caller must change it. */
export class InvalidRequestError extends FloodgateError {
  readonly code = 'INVALID_REQUEST' as const;
}

/** The request is larger than the server accepts (a setting bounds it); nothing of it was decoded. */
export class RequestTooLargeError extends FloodgateError {
  readonly code = 'TOO_LARGE' as const;
}

/** The counter backend could not answer (down, circuit open, script error). */
export class BackendUnavailableError extends FloodgateError {
  readonly code = 'BACKEND_UNAVAILABLE' as const;
}

/** The backend did not answer within the caller's time budget. */
export class DeadlineExceededError extends FloodgateError {
  readonly code = 'DEADLINE_EXCEEDED' as const;
}

/** The service cannot answer yet (no rules loaded, shutting down). */
export class NotReadyError extends FloodgateError {
  readonly code = 'NOT_READY' as const;
}

/** A rule file is invalid; the message is `<file>: <message>` in the reference's words. */
export class ConfigError extends FloodgateError {
  readonly code = 'CONFIG' as const;
}

/** An environment variable has a bad value; start-up stops with this message. */
export class SettingsError extends FloodgateError {
  readonly code = 'SETTINGS' as const;
}
