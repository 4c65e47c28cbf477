import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { Worker } from 'node:worker_threads';

/** What the sink has received so far. */
export interface SinkTotals {
  /** Characters received. */
  received: number;
  /** Longest line. */
  longest: number;
  /** Sum of the counter values of the watched stat. */
  sum: number;
  /** Datagrams the kernel dropped because the sink's receive buffer was full (UDP only). */
  kernelDrops: number;
}

interface LineCounter {
  received: number;
  longest: number;
  sum: number;
  take(text: string): void;
}

// Sums the counters of one stat out of statsd text. Self-contained: its source also runs in the
// UDP worker.
function makeCounter(stat: string): LineCounter {
  let tail = '';
  const counter: LineCounter = {
    received: 0,
    longest: 0,
    sum: 0,
    take(text: string): void {
      counter.received += text.length;
      const lines = (tail + text).split('\n');
      tail = lines.pop() ?? '';
      if (tail.length > 1_000_000) tail = '';
      for (const line of lines) {
        counter.longest = Math.max(counter.longest, line.length);
        if (line.startsWith(stat + ':')) counter.sum += Number(/^[^:]*:(\d+)\|c/.exec(line)?.[1] ?? 0);
      }
    },
  };
  return counter;
}

// The UDP side reads on a worker thread of its own, with a large receive buffer: on a busy
// machine the test's main thread (which also drives the attack) can stall long enough for a
// flush burst to overflow a 208 KiB socket buffer, and the kernel would drop datagrams the
// service did send (seen in CI as "statsd got 43 of the ordinary client's 60 hits").
const UDP_WORKER = `
const makeCounter = (${makeCounter.toString()});
const { parentPort, workerData } = require('node:worker_threads');
const dgram = require('node:dgram');
const counter = makeCounter(workerData.stat);
const udp = dgram.createSocket('udp4');
udp.on('message', (m) => counter.take(m.toString() + '\\n'));
udp.bind(0, '127.0.0.1', () => {
  try { udp.setRecvBufferSize(8 * 1024 * 1024); } catch {}
  parentPort.postMessage({ port: udp.address().port, buffer: udp.getRecvBufferSize() });
});
parentPort.on('message', (m) => {
  if (m === 'totals') parentPort.postMessage({ received: counter.received, longest: counter.longest, sum: counter.sum });
  if (m === 'close') udp.close(() => parentPort.close());
});
`;

/** A statsd on loopback that sums the counters of one stat and measures what it receives. */
export class StatsdSink {
  private tcp: Server | undefined;
  private tcpCounter: LineCounter | undefined;
  private worker: Worker | undefined;
  private port = 0;

  constructor(private readonly stat: string) {}

  async listen(protocol: 'tcp' | 'udp'): Promise<number> {
    if (protocol === 'udp') {
      const worker = new Worker(UDP_WORKER, { eval: true, workerData: { stat: this.stat } });
      this.worker = worker;
      const ready = await new Promise<{ port: number }>((resolve, reject) => {
        worker.once('message', resolve);
        worker.once('error', reject);
      });
      this.port = ready.port;
      return ready.port;
    }
    const counter = makeCounter(this.stat);
    this.tcpCounter = counter;
    const tcp = createServer((s) => s.on('data', (c: Buffer) => counter.take(c.toString())).on('error', () => {}));
    this.tcp = tcp;
    await new Promise<void>((resolve) => tcp.listen(0, '127.0.0.1', resolve));
    return (tcp.address() as { port: number }).port;
  }

  async totals(): Promise<SinkTotals> {
    const worker = this.worker;
    if (worker === undefined) {
      const c = this.tcpCounter;
      return { received: c?.received ?? 0, longest: c?.longest ?? 0, sum: c?.sum ?? 0, kernelDrops: 0 };
    }
    const t = await new Promise<Omit<SinkTotals, 'kernelDrops'>>((resolve) => {
      worker.once('message', resolve);
      worker.postMessage('totals');
    });
    return { ...t, kernelDrops: udpDrops(this.port) };
  }

  async close(): Promise<void> {
    const worker = this.worker;
    this.worker = undefined;
    if (worker !== undefined) {
      const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
      worker.postMessage('close');
      await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 1000))]);
      await worker.terminate();
    }
    const tcp = this.tcp;
    this.tcp = undefined;
    await new Promise<void>((resolve) => (tcp ? tcp.close(() => resolve()) : resolve()));
  }
}

/** The kernel's drop count of the IPv4 UDP socket bound to 127.0.0.1:port (last column of /proc/net/udp). */
function udpDrops(port: number): number {
  const local = `0100007F:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  try {
    for (const line of readFileSync('/proc/net/udp', 'utf8').split('\n')) {
      const fields = line.trim().split(/\s+/);
      if (fields[1] === local) return Number(fields[fields.length - 1]);
    }
  } catch {
    // Not Linux: no figure.
  }
  return 0;
}
