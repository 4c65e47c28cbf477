/** The Redis client's error in an operator's words (the client's own text stays in `cause`). */
export function redisFailure(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  if (/Stream isn't writeable|Connection is closed|ECONNREFUSED|ECONNRESET|EPIPE|ENOTCONN|ETIMEDOUT|getaddrinfo/.test(message))
    return 'redis is not connected';
  if (/timed? ?out/i.test(message)) return 'redis did not answer in time';
  return `redis answered with an error: ${message}`;
}
