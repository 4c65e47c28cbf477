// Debian's `chromium`, headless, driven over the DevTools protocol on a pipe
// (--remote-debugging-pipe: NUL-delimited JSON on file descriptors 3 and 4), so no WebSocket
// client or browser download is needed.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable, Writable } from 'node:stream';

export const CHROMIUM_BIN = process.env['CHROMIUM_BIN'] ?? 'chromium';

export interface Page {
  /** Evaluates `expression` in the page and returns its value (JSON-serialisable). */
  evaluate<T>(expression: string): Promise<T>;
}

export interface Browser {
  open(url: string): Promise<Page>;
  close(): Promise<void>;
}

interface Pending {
  resolve(value: Record<string, unknown>): void;
  reject(err: Error): void;
}

export async function launchChromium(): Promise<Browser> {
  const profile = mkdtempSync(join(tmpdir(), 'floodgate-chromium-'));
  const proc: ChildProcess = spawn(
    CHROMIUM_BIN,
    [
      '--headless=new',
      '--no-sandbox',
      '--disable-gpu',
      '--no-first-run',
      '--disable-dev-shm-usage',
      '--disable-quic',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--remote-debugging-pipe',
      `--user-data-dir=${profile}`,
      'about:blank',
    ],
    { stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'] },
  );
  let stderr = '';
  proc.stderr!.on('data', (c: Buffer) => (stderr = (stderr + c.toString()).slice(-5000)));
  const toBrowser = proc.stdio[3] as Writable;
  const fromBrowser = proc.stdio[4] as Readable;
  const pending = new Map<number, Pending>();
  let nextId = 1;
  let buffer = '';
  fromBrowser.on('data', (chunk: Buffer) => {
    buffer += chunk.toString();
    for (let end = buffer.indexOf('\0'); end >= 0; end = buffer.indexOf('\0')) {
      const message = JSON.parse(buffer.slice(0, end)) as { id?: number; result?: Record<string, unknown>; error?: { message: string } };
      buffer = buffer.slice(end + 1);
      const p = message.id !== undefined ? pending.get(message.id) : undefined;
      if (p === undefined) continue;
      pending.delete(message.id as number);
      if (message.error) p.reject(new Error(message.error.message));
      else p.resolve(message.result ?? {});
    }
  });
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  proc.once('exit', () => {
    for (const p of pending.values()) p.reject(new Error(`chromium exited: ${stderr}`));
    pending.clear();
  });
  const send = (method: string, params: Record<string, unknown> = {}, sessionId?: string): Promise<Record<string, unknown>> =>
    new Promise((resolve, reject) => {
      const id = nextId++;
      pending.set(id, { resolve, reject });
      toBrowser.write(JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) }) + '\0');
    });
  await send('Browser.getVersion');
  return {
    async open(url) {
      const { targetId } = (await send('Target.createTarget', { url })) as { targetId: string };
      const { sessionId } = (await send('Target.attachToTarget', { targetId, flatten: true })) as { sessionId: string };
      return {
        async evaluate<T>(expression: string): Promise<T> {
          const reply = (await send('Runtime.evaluate', { expression, returnByValue: true }, sessionId)) as {
            result: { value: T };
            exceptionDetails?: unknown;
          };
          if (reply.exceptionDetails) throw new Error(`page threw: ${JSON.stringify(reply.exceptionDetails)}`);
          return reply.result.value;
        },
      };
    },
    async close() {
      const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
      if (proc.exitCode === null && proc.signalCode === null) {
        // A graceful close lets Chromium's helper processes leave the profile before it is
        // removed; SIGKILL of the browser alone left them writing into it (ENOTEMPTY).
        await Promise.race([send('Browser.close').catch(() => undefined), delay(3000)]);
        await Promise.race([exited, delay(3000)]);
        if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
      }
      await exited;
      // A helper process may still write for a moment: retry rather than fail the suite.
      rmSync(profile, { recursive: true, force: true, maxRetries: 20, retryDelay: 100 });
    },
  };
}
