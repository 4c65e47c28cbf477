import { join } from 'node:path';
import { freePort } from './free-port';
import { HOST, RedisProcess, waitForServer } from './redis-process';

const READY_TIMEOUT_MS = 20_000;

export interface TlsSentinelOptions {
  /** Holds ca.crt, server.crt, server.key (test/helpers/certificates.ts makeCertificates). */
  readonly certDir: string;
  readonly masterName?: string;
  /** requirepass of the master (the sentinel authenticates with it too). */
  readonly masterPassword: string;
  /** requirepass of the sentinel. */
  readonly sentinelPassword: string;
}

/** A master and a sentinel that both speak TLS (client certificates required) on their TLS ports. */
export interface TlsSentinelHarness {
  readonly masterName: string;
  readonly master: RedisProcess;
  readonly sentinel: RedisProcess;
  /** The TLS ports; the plain ports serve only the harness's own probes. */
  readonly masterTlsPort: number;
  readonly sentinelTlsPort: number;
  stop(): Promise<void>;
}

function tlsConfig(certDir: string, tlsPort: number): string[] {
  return [
    `tls-port ${tlsPort}`,
    `tls-cert-file ${join(certDir, 'server.crt')}`,
    `tls-key-file ${join(certDir, 'server.key')}`,
    `tls-ca-cert-file ${join(certDir, 'ca.crt')}`,
    'tls-auth-clients yes',
    // The sentinel reaches the master over TLS, and announces the master's TLS port.
    'tls-replication yes',
  ];
}

/**
 * Starts a master and one sentinel monitoring it by its TLS port, each with a password; resolves
 * once the sentinel names the master and sees it up.
 */
export async function startTlsSentinel(options: TlsSentinelOptions): Promise<TlsSentinelHarness> {
  const masterName = options.masterName ?? 'tlsmaster';
  const started: RedisProcess[] = [];
  try {
    const masterTlsPort = await freePort();
    const master = await RedisProcess.start({
      label: 'tls sentinel master',
      password: options.masterPassword,
      config: tlsConfig(options.certDir, masterTlsPort),
    });
    started.push(master);
    const sentinelTlsPort = await freePort();
    const sentinel = await RedisProcess.start({
      mode: 'sentinel',
      label: 'tls sentinel',
      password: options.sentinelPassword,
      config: [
        ...tlsConfig(options.certDir, sentinelTlsPort),
        `sentinel monitor ${masterName} ${HOST} ${masterTlsPort} 1`,
        `sentinel auth-pass ${masterName} ${options.masterPassword}`,
        `sentinel down-after-milliseconds ${masterName} 1000`,
      ],
    });
    started.push(sentinel);
    await waitForServer(
      [master, sentinel],
      `the sentinel to see ${masterName} up on its TLS port`,
      async () => {
        const fields = await sentinel.command('SENTINEL', 'MASTER', masterName);
        const list = Array.isArray(fields) ? fields.map(String) : [];
        const get = (name: string) => list[list.indexOf(name) + 1];
        return get('port') === String(masterTlsPort) && get('flags') === 'master';
      },
      READY_TIMEOUT_MS,
    );
    return {
      masterName,
      master,
      sentinel,
      masterTlsPort,
      sentinelTlsPort,
      stop: async () => {
        await Promise.all(started.map((s) => s.stop()));
      },
    };
  } catch (err) {
    await Promise.all(started.map((s) => s.stop()));
    throw err;
  }
}
