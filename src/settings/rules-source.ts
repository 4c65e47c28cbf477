import { SettingsError } from '../base/errors';
import type { XdsSettings } from '../config/xds/xds-rules-client';
import { bool, duration, float, int, oneOf, str, type Env } from './parse';

// CONFIG_TYPE=GRPC_XDS_SOTW: rules from an xDS management server (the reference's names and defaults).

export type ConfigType = 'FILE' | 'GRPC_XDS_SOTW';

/** `key=value,key2=value2`; like the reference, an entry without `=` is skipped. */
function xdsNodeMetadata(env: Env): Record<string, string> {
  const metadata: Record<string, string> = {};
  for (const entry of str(env, 'CONFIG_GRPC_XDS_NODE_METADATA', '').split(',')) {
    const eq = entry.indexOf('=');
    if (eq >= 0) metadata[entry.slice(0, eq)] = entry.slice(eq + 1);
  }
  return metadata;
}

/** `name:value,name2:value2` (the reference's map syntax); names become lower-case gRPC metadata keys. */
function xdsAdditionalHeaders(env: Env): Record<string, string> {
  const name = 'CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS';
  const raw = str(env, name, '');
  const headers: Record<string, string> = {};
  if (raw === '') return headers;
  for (const entry of raw.split(',')) {
    const colon = entry.indexOf(':');
    const key = entry.slice(0, colon).trim().toLowerCase();
    // -bin keys carry bytes and grpc- keys are reserved: neither can be sent as text.
    if (colon < 0 || !/^[0-9a-z_.-]+$/.test(key) || key.endsWith('-bin') || key.startsWith('grpc-')) {
      throw new SettingsError(`invalid value for ${name}: '${raw}' (expected name:value pairs separated by commas; bad entry '${entry}')`);
    }
    headers[key] = entry.slice(colon + 1);
  }
  return headers;
}

function xdsTls(env: Env): XdsSettings['tls'] {
  // As in the reference, the TLS files mean nothing unless CONFIG_GRPC_XDS_SERVER_USE_TLS is true.
  if (!bool(env, 'CONFIG_GRPC_XDS_SERVER_USE_TLS', false)) return undefined;
  const caCert = str(env, 'CONFIG_GRPC_XDS_SERVER_TLS_CACERT', '');
  const clientCert = str(env, 'CONFIG_GRPC_XDS_CLIENT_TLS_CERT', '');
  const clientKey = str(env, 'CONFIG_GRPC_XDS_CLIENT_TLS_KEY', '');
  const serverSan = str(env, 'CONFIG_GRPC_XDS_SERVER_TLS_SAN', '');
  if ((clientCert === '') !== (clientKey === '')) {
    throw new SettingsError(`invalid value for CONFIG_GRPC_XDS_CLIENT_TLS_CERT/CONFIG_GRPC_XDS_CLIENT_TLS_KEY: both or neither must be set`);
  }
  return Object.freeze({
    ...(caCert ? { caCert } : {}),
    ...(clientCert ? { clientCert, clientKey } : {}),
    ...(serverSan ? { serverSan } : {}),
  });
}

function nonNegativeDuration(env: Env, name: string, fallbackMs: number): number {
  const ms = duration(env, name, fallbackMs);
  if (ms > 24 * 3_600_000) throw new SettingsError(`invalid value for ${name}: '${env[name]}' (expected a duration up to 24h)`);
  return ms;
}

/** Every CONFIG_GRPC_XDS_* and XDS_CLIENT_* setting; read (and so validated) whatever CONFIG_TYPE is, as the reference does. */
function xdsSettings(env: Env): XdsSettings {
  const tls = xdsTls(env);
  return Object.freeze({
    serverUrl: str(env, 'CONFIG_GRPC_XDS_SERVER_URL', 'localhost:18000'),
    nodeId: str(env, 'CONFIG_GRPC_XDS_NODE_ID', 'default'),
    nodeMetadata: Object.freeze(xdsNodeMetadata(env)),
    additionalHeaders: Object.freeze(xdsAdditionalHeaders(env)),
    connectRetryIntervalMs: nonNegativeDuration(env, 'CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL', 3_000),
    backoff: Object.freeze({
      initialMs: nonNegativeDuration(env, 'XDS_CLIENT_BACKOFF_INITIAL_INTERVAL', 10_000),
      maxMs: nonNegativeDuration(env, 'XDS_CLIENT_BACKOFF_MAX_INTERVAL', 60_000),
      factor: float(env, 'XDS_CLIENT_BACKOFF_RANDOM_FACTOR', 0.5, 0, 1000),
      jitter: bool(env, 'XDS_CLIENT_BACKOFF_JITTER', true),
    }),
    maxReceiveMessageBytes: int(env, 'XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES', 0, 0, 2 ** 31 - 1),
    maxResources: int(env, 'XDS_MAX_RESOURCES', 10_000, 1, 1_000_000),
    ...(tls ? { tls } : {}),
  });
}

/** CONFIG_TYPE, and the xDS settings when it is GRPC_XDS_SOTW. */
export function rulesSource(env: Env): { configType: ConfigType; xds?: XdsSettings } {
  const xds = xdsSettings(env);
  const configType = oneOf<ConfigType>(env, 'CONFIG_TYPE', 'FILE', ['FILE', 'GRPC_XDS_SOTW']);
  return configType === 'GRPC_XDS_SOTW' ? { configType, xds } : { configType };
}
