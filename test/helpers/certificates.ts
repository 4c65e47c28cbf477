import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Writes a throwaway CA (`ca.crt`, `ca.key`), a server certificate for 127.0.0.1/localhost
 * (`server.crt`, `server.key`) and a client certificate (`client.crt`, `client.key`) whose SANs
 * are DNS:envoy.gateway and URI:spiffe://cluster/ns/gw/sa/envoy, made with openssl in `dir`.
 */
export function makeCertificates(dir: string): void {
  const run = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
  run('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '1', '-subj', '/CN=floodgate-test-ca');
  for (const name of ['server', 'client']) {
    run('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`);
    const ext = join(dir, `${name}.ext`);
    writeFileSync(
      ext,
      name === 'server'
        ? 'subjectAltName=IP:127.0.0.1,DNS:localhost\n'
        : 'extendedKeyUsage=clientAuth\nsubjectAltName=DNS:envoy.gateway,URI:spiffe://cluster/ns/gw/sa/envoy\n',
    );
    run(
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
      ext,
    );
  }
}

/**
 * Writes `<name>.crt` and `<name>.key` in `dir`: a client certificate signed by the CA that
 * makeCertificates wrote there, with `subjectAltName` exactly as given (openssl syntax, e.g.
 * `email:spiffe://cluster/envoy` or `URI:spiffe://x,IP:10.0.0.1`).
 */
export function makeClientCertificate(dir: string, name: string, subjectAltName: string): void {
  const run = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
  run('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`);
  writeFileSync(join(dir, `${name}.ext`), `extendedKeyUsage=clientAuth\nsubjectAltName=${subjectAltName}\n`);
  run(
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
