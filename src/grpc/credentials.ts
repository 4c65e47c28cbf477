import { X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createSecureContext } from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import { SettingsError } from '../base/errors';
import type { Logger } from '../base/log';

// One job: build the gRPC server credentials from GRPC_SERVER_TLS_* / GRPC_CLIENT_TLS_*, keep
// them current as the files rotate, and check a client certificate's SAN.

type CertificateProvider = grpc.experimental.CertificateProvider;
type IdentityUpdate = grpc.experimental.IdentityCertificateUpdate;
type CaUpdate = grpc.experimental.CaCertificateUpdate;

/** GRPC_SERVER_USE_TLS and its files: TLS, and mTLS when a client CA is set. */
export interface GrpcTls {
  readonly cert: string;
  readonly key: string;
  readonly clientCaCert?: string;
  readonly clientSan?: string;
}

// How often TLS files are re-read: a rotated certificate is in use within this time.
const TLS_REFRESH_MS = 1000;
const FIRST_LOAD_TIMEOUT_MS = 5000;
// A TLS handshake takes milliseconds; a client that has not finished one in this time is not going to.
const HANDSHAKE_TIMEOUT_MS = 10_000;

interface Pair {
  readonly identity: IdentityUpdate;
  readonly ca?: CaUpdate;
}

/** The variable, the file and the reason, in one line; never the file's content. */
class TlsFileError extends Error {}

async function readTlsFile(path: string, variable: string): Promise<Buffer> {
  try {
    return await readFile(path);
  } catch (err) {
    throw new TlsFileError(`${variable} ${path}: ${(err as Error).message}`);
  }
}

/** Reads the files and checks that they make a working TLS context: the key fits the certificate. */
async function readPair(tls: GrpcTls): Promise<Pair> {
  const [certificate, privateKey, caCertificate] = await Promise.all([
    readTlsFile(tls.cert, 'GRPC_SERVER_TLS_CERT'),
    readTlsFile(tls.key, 'GRPC_SERVER_TLS_KEY'),
    tls.clientCaCert === undefined ? undefined : readTlsFile(tls.clientCaCert, 'GRPC_CLIENT_TLS_CACERT'),
  ]);
  try {
    createSecureContext({ cert: certificate, key: privateKey });
  } catch (err) {
    throw new TlsFileError(`GRPC_SERVER_TLS_CERT ${tls.cert} / GRPC_SERVER_TLS_KEY ${tls.key}: ${(err as Error).message}`);
  }
  if (caCertificate !== undefined) {
    try {
      // createSecureContext accepts any bytes as a CA; parsing one certificate is the real check.
      new X509Certificate(caCertificate);
      createSecureContext({ ca: caCertificate });
    } catch (err) {
      throw new TlsFileError(`GRPC_CLIENT_TLS_CACERT ${tls.clientCaCert}: ${(err as Error).message}`);
    }
  }
  return { identity: { certificate, privateKey }, ...(caCertificate ? { ca: { caCertificate } } : {}) };
}

function samePair(a: Pair, b: Pair): boolean {
  return (
    a.identity.certificate.equals(b.identity.certificate) &&
    a.identity.privateKey.equals(b.identity.privateKey) &&
    (a.ca?.caCertificate ?? Buffer.alloc(0)).equals(b.ca?.caCertificate ?? Buffer.alloc(0))
  );
}

/**
 * A certificate provider that re-reads the files every second and passes on only a pair that
 * works: a key that does not fit, a missing or unreadable file keeps the last good pair in use
 * (new connections keep succeeding) and is logged once, until the files are fixed.
 */
class CheckedFileCertificates implements CertificateProvider {
  private current: Pair | undefined;
  private lastError = '';
  private timer: NodeJS.Timeout | undefined;
  private readonly identityListeners = new Set<(u: IdentityUpdate | null) => void>();
  private readonly caListeners = new Set<(u: CaUpdate | null) => void>();

  constructor(
    private readonly tls: GrpcTls,
    private readonly logger: Logger,
  ) {}

  /** The first read; start-up fails (SettingsError) when the files do not make a working pair. */
  async start(): Promise<void> {
    const timeout = new Promise<never>((_, reject) =>
      setTimeout(
        () => reject(new TlsFileError(`cannot read the TLS files within ${FIRST_LOAD_TIMEOUT_MS / 1000} s`)),
        FIRST_LOAD_TIMEOUT_MS,
      ).unref(),
    );
    try {
      this.current = await Promise.race([readPair(this.tls), timeout]);
    } catch (err) {
      throw new SettingsError(`cannot use the gRPC TLS files: ${(err as Error).message}`);
    }
    this.timer = setInterval(() => void this.refresh(), TLS_REFRESH_MS);
    this.timer.unref();
  }

  close(): void {
    clearInterval(this.timer);
  }

  private async refresh(): Promise<void> {
    let next: Pair;
    try {
      next = await readPair(this.tls);
    } catch (err) {
      const message = (err as Error).message;
      if (message !== this.lastError) {
        this.logger.error(`TLS files not reloaded, keeping the previous certificate: ${message}`);
        this.lastError = message;
      }
      return;
    }
    if (this.lastError !== '') this.logger.warn('TLS files are valid again');
    this.lastError = '';
    if (this.current !== undefined && samePair(this.current, next)) return;
    this.current = next;
    this.logger.info('TLS certificate reloaded');
    for (const listener of this.identityListeners) listener(next.identity);
    if (next.ca) for (const listener of this.caListeners) listener(next.ca);
  }

  addIdentityCertificateListener(listener: (u: IdentityUpdate | null) => void): void {
    this.identityListeners.add(listener);
    // Asynchronously, as grpc-js registers its own watcher only after adding this listener.
    process.nextTick(() => listener(this.current?.identity ?? null));
  }

  removeIdentityCertificateListener(listener: (u: IdentityUpdate | null) => void): void {
    this.identityListeners.delete(listener);
    this.stopWhenUnused();
  }

  addCaCertificateListener(listener: (u: CaUpdate | null) => void): void {
    this.caListeners.add(listener);
    process.nextTick(() => listener(this.current?.ca ?? null));
  }

  removeCaCertificateListener(listener: (u: CaUpdate | null) => void): void {
    this.caListeners.delete(listener);
    this.stopWhenUnused();
  }

  // The server removes its listeners when it shuts down: stop reading files nobody serves.
  private stopWhenUnused(): void {
    if (this.identityListeners.size === 0 && this.caListeners.size === 0) this.close();
  }
}

/**
 * Plaintext, TLS, or mTLS when a client CA is set. The files are watched, so a certificate that
 * cert-manager (or anyone) rotates is served without a restart; a bad rotation is refused.
 */
export async function grpcServerCredentials(
  tls: GrpcTls | undefined,
  maxConnectionIdleMs: number,
  logger: Logger,
): Promise<grpc.ServerCredentials> {
  if (tls === undefined) return grpc.ServerCredentials.createInsecure();
  const files = new CheckedFileCertificates(tls, logger);
  await files.start();
  const requireClientCert = tls.clientCaCert !== undefined;
  // grpc-js names the first parameter caCertificateProvider but uses it as the identity provider.
  const credentials = grpc.experimental.createCertificateProviderServerCredentials(files, requireClientCert ? files : null, requireClientCert);
  // grpc.max_connection_idle_ms starts only once TLS is up; Node's handshake timeout (120 s by
  // default) bounds a connection that never completes it. grpc-js passes these options to
  // http2.createSecureServer and offers no setting of its own for it.
  Object.assign(credentials._getConstructorOptions() ?? {}, { handshakeTimeout: Math.min(HANDSHAKE_TIMEOUT_MS, maxConnectionIdleMs) });
  return credentials;
}

/** One subject alternative name: its type as Node prints it (`DNS`, `URI`, `email`, `IP Address`...) and value. */
export interface SubjectAltName {
  readonly type: string;
  readonly value: string;
}

/**
 * Parses Node's `subjectaltname` text (`DNS:a, URI:spiffe://x, email:"quoted, value"`). A value
 * holding a comma or quote is JSON-quoted by Node, so it cannot pose as another entry. Malformed
 * text reads as no names at all.
 */
export function subjectAltNames(text: string): SubjectAltName[] {
  const names: SubjectAltName[] = [];
  let i = 0;
  while (i < text.length) {
    const colon = text.indexOf(':', i);
    if (colon < 0) return [];
    const type = text.slice(i, colon);
    let end: number;
    let value: string;
    if (text[colon + 1] === '"') {
      let k = colon + 2;
      while (k < text.length && text[k] !== '"') k += text[k] === '\\' ? 2 : 1;
      if (k >= text.length) return [];
      try {
        value = JSON.parse(text.slice(colon + 1, k + 1)) as string;
      } catch {
        return [];
      }
      end = k + 1;
    } else {
      const comma = text.indexOf(', ', colon + 1);
      end = comma < 0 ? text.length : comma;
      value = text.slice(colon + 1, end);
    }
    names.push({ type, value });
    if (end === text.length) break;
    if (!text.startsWith(', ', end)) return [];
    i = end + 2;
  }
  return names;
}

// The reference matches DNS names; URI SANs carry SPIFFE identities. An email, IP or other SAN
// with the same text is a different identity.
const MATCHING_TYPES: ReadonlySet<string> = new Set(['DNS', 'URI']);

/** True when `subjectaltname` lists a DNS or URI SAN exactly equal to `san`. */
export function carriesSan(subjectaltname: string | undefined, san: string): boolean {
  if (!subjectaltname) return false;
  return subjectAltNames(subjectaltname).some((n) => MATCHING_TYPES.has(n.type) && n.value === san);
}

/** True when the mTLS peer certificate carries `san` as a DNS or URI SAN. */
export function peerHasSan(call: grpc.ServerUnaryCall<unknown, unknown>, san: string): boolean {
  return carriesSan(call.getAuthContext().sslPeerCertificate?.subjectaltname, san);
}
