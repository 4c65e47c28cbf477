export type LogLevel = 'DEBUG' | 'INFO' | 'WARN' | 'ERROR';
export type LogFormat = 'text' | 'json';

const ORDER: Readonly<Record<LogLevel, number>> = { DEBUG: 10, INFO: 20, WARN: 30, ERROR: 40 };

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
}

/**
 * A text-format value: bare when it holds nothing that could end it early, else JSON-quoted, so
 * a quote or newline in a message (ioredis errors carry server text) cannot break or forge a line.
 */
function textValue(v: unknown): string {
  const s = typeof v === 'string' ? v : (JSON.stringify(v) ?? String(v));
  return /^[^\s"\\=]+$/.test(s) ? s : JSON.stringify(s);
}

/** A small levelled logger writing text or JSON lines to stderr. */
export function createLogger(level: LogLevel, format: LogFormat, write: (line: string) => void = (l) => process.stderr.write(l)): Logger {
  const min = ORDER[level];
  const emit = (lvl: LogLevel, msg: string, fields?: Record<string, unknown>): void => {
    if (ORDER[lvl] < min) return;
    const time = new Date().toISOString();
    if (format === 'json') {
      write(JSON.stringify({ time, level: lvl.toLowerCase(), msg, ...fields }) + '\n');
    } else {
      const extra = fields
        ? ' ' +
          Object.entries(fields)
            .map(([k, v]) => `${k}=${textValue(v)}`)
            .join(' ')
        : '';
      write(`time="${time}" level=${lvl.toLowerCase()} msg=${JSON.stringify(msg)}${extra}\n`);
    }
  };
  return {
    debug: (m, f) => emit('DEBUG', m, f),
    info: (m, f) => emit('INFO', m, f),
    warn: (m, f) => emit('WARN', m, f),
    error: (m, f) => emit('ERROR', m, f),
  };
}
