import * as net from 'node:net';

/** A decoded RESP2 reply. Error replies reject instead of resolving. */
export type RespValue = string | number | null | RespValue[];

export interface RespOptions {
  readonly password?: string;
  readonly timeoutMs?: number;
}

// The harness talks to servers with one-shot connections rather than ioredis: no reconnection,
// no offline queue, no cluster redirection, so a probe means exactly one attempt.

/**
 * Sends one command on a fresh connection (after AUTH when a password is given) and resolves with
 * its reply. Rejects on connection errors, error replies and after `timeoutMs` (default 1000).
 */
export function respCommand(host: string, port: number, args: readonly (string | number)[], options: RespOptions = {}): Promise<RespValue> {
  const commands = options.password === undefined ? [args] : [['AUTH', options.password], args];
  return new Promise<RespValue>((resolve, reject) => {
    const socket = net.connect({ host, port });
    let buffer = Buffer.alloc(0);
    const replies: RespValue[] = [];
    let settled = false;
    const finish = (err: Error | undefined, value?: RespValue): void => {
      if (settled) return;
      settled = true;
      socket.destroy();
      if (err) reject(err);
      else resolve(value ?? null);
    };
    socket.setTimeout(options.timeoutMs ?? 1000, () => finish(new Error(`${host}:${port} did not answer ${String(args[0])} in time`)));
    socket.on('error', (err) => finish(err));
    socket.on('close', () => finish(new Error(`${host}:${port} closed the connection`)));
    socket.on('connect', () => socket.write(commands.map(encodeCommand).join('')));
    socket.on('data', (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk]);
      try {
        for (;;) {
          const parsed = parseReply(buffer, 0);
          if (parsed === undefined) return;
          buffer = buffer.subarray(parsed.next);
          replies.push(parsed.value);
          if (replies.length === commands.length) return finish(undefined, parsed.value);
        }
      } catch (err) {
        finish(err as Error);
      }
    });
  });
}

function encodeCommand(args: readonly (string | number)[]): string {
  let out = `*${args.length}\r\n`;
  for (const arg of args) {
    const s = String(arg);
    out += `$${Buffer.byteLength(s)}\r\n${s}\r\n`;
  }
  return out;
}

/** Parses one reply at `offset`; undefined when the buffer does not hold all of it yet. */
function parseReply(buf: Buffer, offset: number): { value: RespValue; next: number } | undefined {
  const lineEnd = buf.indexOf('\r\n', offset);
  if (lineEnd < 0) return undefined;
  const type = String.fromCharCode(buf[offset] ?? 0);
  const line = buf.toString('utf8', offset + 1, lineEnd);
  const next = lineEnd + 2;
  switch (type) {
    case '+':
      return { value: line, next };
    case '-':
      throw new RespError(line);
    case ':':
      return { value: Number(line), next };
    case '$': {
      const len = Number(line);
      if (len < 0) return { value: null, next };
      if (buf.length < next + len + 2) return undefined;
      return { value: buf.toString('utf8', next, next + len), next: next + len + 2 };
    }
    case '*': {
      const count = Number(line);
      if (count < 0) return { value: null, next };
      const items: RespValue[] = [];
      let at = next;
      for (let i = 0; i < count; i++) {
        const item = parseReply(buf, at);
        if (item === undefined) return undefined;
        items.push(item.value);
        at = item.next;
      }
      return { value: items, next: at };
    }
    default:
      throw new Error(`unexpected RESP type byte ${JSON.stringify(type)}`);
  }
}

/** An error reply of the server (`-ERR ...`, `-LOADING ...`). */
export class RespError extends Error {
  override readonly name = 'RespError';
}

/** Parses `INFO` / `CLUSTER INFO` text into a field map. */
export function parseInfo(text: RespValue): Map<string, string> {
  const fields = new Map<string, string>();
  for (const line of String(text).split('\r\n')) {
    const at = line.indexOf(':');
    if (at > 0 && !line.startsWith('#')) fields.set(line.slice(0, at), line.slice(at + 1));
  }
  return fields;
}
