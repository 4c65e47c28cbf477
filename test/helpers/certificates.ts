import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

function openssl(dir: string, ...args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
}

/** Writes `<name>.key` and `<name>.crt` in `dir`, signed by the CA there, with `extensions` (openssl extfile lines). */
function signedByCa(dir: string, name: string, extensions: string): void {
  openssl(dir, 'req', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`);
  writeFileSync(join(dir, `${name}.ext`), extensions);
  openssl(
    dir,
    'x509',
    '-req',
    '-in',
    `${name}.csr`,
    '-CA',
    'ca.crt',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-out',
    `${name}.crt`,
    '-days',
    '1',
    '-extfile',
    `${name}.ext`,
  );
}

/**
 * Writes a throwaway CA (`ca.crt`, `ca.key`), a server certificate for 127.0.0.1/localhost
 * (`server.crt`, `server.key`) and a client certificate (`client.crt`, `client.key`) whose SANs
 * are DNS:envoy.gateway and URI:spiffe://cluster/ns/gw/sa/envoy, made with openssl in `dir`.
 */
export function makeCertificates(dir: string): void {
  openssl(
    dir,
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    'ca.key',
    '-out',
    'ca.crt',
    '-days',
    '1',
    '-subj',
    '/CN=floodgate-test-ca',
  );
  signedByCa(dir, 'server', 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
  signedByCa(dir, 'client', 'extendedKeyUsage=clientAuth\nsubjectAltName=DNS:envoy.gateway,URI:spiffe://cluster/ns/gw/sa/envoy\n');
}

/**
 * Writes `<name>.crt` and `<name>.key` in `dir`: a client certificate signed by the CA that
 * makeCertificates wrote there, with `subjectAltName` exactly as given (openssl syntax, e.g.
 * `email:spiffe://cluster/envoy` or `URI:spiffe://x,IP:10.0.0.1`).
 */
export function makeClientCertificate(dir: string, name: string, subjectAltName: string): void {
  signedByCa(dir, name, `extendedKeyUsage=clientAuth\nsubjectAltName=${subjectAltName}\n`);
}

/**
 * Writes `<name>.crt` and `<name>.key` in `dir`: a certificate for both ends of a TLS connection
 * (server and client authentication), signed by the CA that makeCertificates wrote there, as
 * Envoy Gateway's certgen issues the rate-limit service's (one pair serves gRPC and dials xDS).
 */
export function makeServiceCertificate(dir: string, name: string, subjectAltName: string): void {
  signedByCa(dir, name, `extendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=${subjectAltName}\n`);
}
