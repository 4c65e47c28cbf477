// Slow HTTP clients on loopback (issue 26, finding 7): connections that send a request's headers a
// byte at a time and never finish them, and the fresh-connection /healthcheck a kubelet sends.
import { readFileSync } from 'node:fs';
import * as http from 'node:http';
import * as net from 'node:net';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** One /healthcheck on a fresh connection (as the kubelet's probe): its status, or the error's code. */
export function healthProbe(port: number): Promise<string> {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/healthcheck', agent: false, timeout: 3000 }, (res) => {
      res.resume();
      res.on('end', () => resolve(String(res.statusCode)));
    });
    req.on('timeout', () => req.destroy(Object.assign(new Error('timeout'), { code: 'TIMEOUT' })));
    req.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
  });
}

/**
 * One /healthcheck on a fresh raw connection from `localAddress`, its request sent whole in one
 * write (queued before the connection is up): the status line's code, or the error's code.
 */
export function rawHealthProbe(port: number, localAddress: string): Promise<string> {
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port, localAddress });
    let head = '';
    const done = (r: string): void => {
      s.destroy();
      resolve(r);
    };
    s.setTimeout(5000, () => done('TIMEOUT'));
    s.on('error', (err: NodeJS.ErrnoException) => done(err.code ?? err.message));
    s.on('close', () => done(head === '' ? 'CLOSED' : 'PARTIAL'));
    s.on('data', (chunk: Buffer) => {
      head += chunk.toString('latin1');
      const status = /^HTTP\/1\.1 (\d{3}) /.exec(head);
      if (status !== null) done(status[1] as string);
    });
    s.write('GET /healthcheck HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n');
  });
}

/**
 * Connections waiting in the kernel's accept queue of the IPv4 socket listening on `port`
 * (/proc/net/tcp, Linux): 0 once the server has accepted every connection that is up.
 */
export function acceptQueue(port: number): number {
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  for (const line of readFileSync('/proc/net/tcp', 'latin1').split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f[1]?.endsWith(`:${hexPort}`) && f[3] === '0A') return parseInt((f[4] ?? '0:0').split(':')[1] as string, 16);
  }
  throw new Error(`nothing listens on port ${port} (/proc/net/tcp)`);
}

export async function healthProbes(port: number, count: number): Promise<Record<string, number>> {
  const tally: Record<string, number> = {};
  for (let i = 0; i < count; i++) {
    const r = await healthProbe(port);
    tally[r] = (tally[r] ?? 0) + 1;
    await sleep(100);
  }
  return tally;
}

/**
 * Keeps `count` connections from `localAddress` sending a request's headers one byte every
 * 500 ms (never finishing them), opening a new one whenever the server closes one, until stopped.
 */
export function slowloris(port: number, count: number, localAddress: string) {
  const live = new Set<net.Socket>();
  let stopped = false;
  let opened = 0;
  let closedByServer = 0;
  let connected = 0;
  const open = (): void => {
    if (stopped || opened >= 200_000) return;
    opened++;
    const s = net.connect({ host: '127.0.0.1', port, localAddress });
    live.add(s);
    s.on('error', () => {});
    let up = false;
    s.once('connect', () => {
      up = true;
      connected++;
    });
    s.resume();
    const header = 'GET /healthcheck HTTP/1.1\r\nHost: x\r\nX-Slow: ' + 'a'.repeat(100_000);
    let at = 0;
    const timer = setInterval(() => {
      if (s.writable) s.write(header[at++ % header.length] as string);
    }, 500);
    s.once('close', () => {
      clearInterval(timer);
      live.delete(s);
      if (up) connected--;
      if (stopped) return;
      closedByServer++;
      setTimeout(open, 250);
    });
  };
  for (let i = 0; i < count; i++) open();
  return {
    get open(): number {
      return live.size;
    },
    /** Connections up now (TCP handshake done), whether or not the server has accepted them yet. */
    get connected(): number {
      return connected;
    },
    get closedByServer(): number {
      return closedByServer;
    },
    stop(): void {
      stopped = true;
      for (const s of live) s.destroy();
    },
  };
}
