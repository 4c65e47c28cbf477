import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import * as protobuf from 'protobufjs';
import { SettingsError } from '../../base/errors';
import type { Logger } from '../../base/log';
import { protoDir } from '../../base/paths';
import type { RuleSet } from '../rule-types';
import { RATE_LIMIT_CONFIG_TYPE_URL, snapshotSteps, type AnyResource } from './rate-limit-config-resource';
import { runInSlices } from './time-slices';
import { XdsBackoff, type XdsBackoffSettings } from './xds-backoff';
import { RejectionPacer } from './xds-rejection-pacer';

// The ADS messages as plain objects: field names as in the proto, enums as names, defaults filled.
const ADS_LOADER_OPTIONS: protoLoader.Options = {
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
  includeDirs: [protoDir],
};

/** TLS to the management server (CONFIG_GRPC_XDS_SERVER_USE_TLS and the files it names). */
export interface XdsTls {
  /** CA that signs the server's certificate; system roots when absent. */
  readonly caCert?: string;
  /** Client certificate and key: mTLS. */
  readonly clientCert?: string;
  readonly clientKey?: string;
  /** The name the server's certificate must carry, instead of the URL's host. */
  readonly serverSan?: string;
}

/** CONFIG_TYPE=GRPC_XDS_SOTW: where the rules come from. */
export interface XdsSettings {
  readonly serverUrl: string;
  readonly nodeId: string;
  readonly nodeMetadata: Readonly<Record<string, string>>;
  /** Sent with the stream as gRPC metadata. */
  readonly additionalHeaders: Readonly<Record<string, string>>;
  /** Between attempts to connect while the server cannot be reached. */
  readonly connectRetryIntervalMs: number;
  readonly backoff: XdsBackoffSettings;
  /** 0: gRPC's default (4 MiB). */
  readonly maxReceiveMessageBytes: number;
  /** XDS_MAX_RESOURCES: a snapshot with more resources is NACKed before it is decoded. */
  readonly maxResources: number;
  readonly tls?: XdsTls;
}

export interface XdsRulesClientOptions {
  readonly settings: XdsSettings;
  readonly mergeDomainConfig: boolean;
  readonly logger: Logger;
  /** A snapshot was accepted (ACKed); the caller swaps its rules. */
  readonly onLoaded: (rules: RuleSet) => void;
  /**
   * A snapshot was rejected (NACKed); the caller keeps its current rules. `log` is false while
   * rejections are paced (at most one logged a second); `unlogged` counts those not logged since the last.
   */
  readonly onError: (err: Error, report: { readonly log: boolean; readonly unlogged: number }) => void;
}

interface DiscoveryResponse {
  readonly version_info: string;
  readonly resources: readonly AnyResource[];
  readonly type_url: string;
  readonly nonce: string;
}

interface DiscoveryRequest {
  readonly version_info: string;
  readonly node: { readonly id: string; readonly metadata: { readonly fields: Record<string, { readonly stringValue: string }> } };
  readonly type_url: string;
  readonly response_nonce: string;
  readonly error_detail?: { readonly code: number; readonly message: string };
}

type AdsStream = grpc.ClientDuplexStream<DiscoveryRequest, DiscoveryResponse>;

/**
 * Identifies a snapshot by its version and content, whatever order the resources come in. In
 * steps (one per resource), as thousands of digests take long enough to stall the loop.
 */
function* snapshotKeySteps(response: DiscoveryResponse): Generator<void, string> {
  const parts: string[] = [];
  for (const resource of response.resources) {
    parts.push(createHash('sha256').update(resource.type_url).update('\0').update(resource.value).digest('hex'));
    yield;
  }
  return createHash('sha256').update(response.version_info).update('\0').update(parts.sort().join(',')).digest('hex');
}

/**
 * DiscoveryResponse bytes → the fields read here, with protobufjs' decode alone: proto-loader's
 * own deserializer also converts every message to a plain object with its defaults, which for a
 * snapshot of thousands of resources blocked the loop for ~90 ms before any of it was seen.
 */
function discoveryResponseDecoder(): (bytes: Buffer) => DiscoveryResponse {
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => join(protoDir, target);
  root.loadSync('envoy/service/discovery/v3/discovery.proto', { keepCase: true });
  const type = root.lookupType('envoy.service.discovery.v3.DiscoveryResponse');
  return (bytes) => type.decode(bytes) as unknown as DiscoveryResponse;
}

let adsClientConstructor: grpc.ServiceClientConstructor | undefined;

function loadAdsClient(): grpc.ServiceClientConstructor {
  if (adsClientConstructor) return adsClientConstructor;
  // Bytes stay bytes: each resource's `value` is decoded as a RateLimitConfig afterwards.
  const definition = protoLoader.loadSync('envoy/service/discovery/v3/ads.proto', ADS_LOADER_OPTIONS);
  const service = definition['envoy.service.discovery.v3.AggregatedDiscoveryService'] as protoLoader.ServiceDefinition;
  service.StreamAggregatedResources = {
    ...(service.StreamAggregatedResources as protoLoader.MethodDefinition<object, object>),
    responseDeserialize: discoveryResponseDecoder(),
  };
  const pkg = grpc.loadPackageDefinition(definition) as unknown as {
    envoy: { service: { discovery: { v3: { AggregatedDiscoveryService: grpc.ServiceClientConstructor } } } };
  };
  adsClientConstructor = pkg.envoy.service.discovery.v3.AggregatedDiscoveryService;
  return adsClientConstructor;
}

/** Reads the TLS files once, at start; a missing or malformed one stops the start with its name. */
function channelCredentials(tls: XdsTls | undefined): grpc.ChannelCredentials {
  if (!tls) return grpc.credentials.createInsecure();
  const read = (path: string | undefined, name: string): Buffer | null => {
    if (!path) return null;
    try {
      return readFileSync(path);
    } catch (err) {
      throw new SettingsError(`invalid value for ${name}: '${path}' (${(err as Error).message})`, { cause: err });
    }
  };
  const ca = read(tls.caCert, 'CONFIG_GRPC_XDS_SERVER_TLS_CACERT');
  const key = read(tls.clientKey, 'CONFIG_GRPC_XDS_CLIENT_TLS_KEY');
  const cert = read(tls.clientCert, 'CONFIG_GRPC_XDS_CLIENT_TLS_CERT');
  try {
    return grpc.credentials.createSsl(ca, key, cert);
  } catch (err) {
    throw new SettingsError(`invalid xDS TLS files: ${(err as Error).message}`, { cause: err });
  }
}

function channelOptions(settings: XdsSettings): grpc.ChannelOptions {
  return {
    // grpc-js reconnects by itself; a steady interval while the server is away, as configured.
    'grpc.initial_reconnect_backoff_ms': Math.max(1, Math.round(settings.connectRetryIntervalMs)),
    'grpc.max_reconnect_backoff_ms': Math.max(1, Math.round(settings.connectRetryIntervalMs)),
    ...(settings.maxReceiveMessageBytes > 0 ? { 'grpc.max_receive_message_length': settings.maxReceiveMessageBytes } : {}),
    ...(settings.tls?.serverSan ? { 'grpc.ssl_target_name_override': settings.tls.serverSan } : {}),
  };
}

/**
 * The reference's xDS config provider: one ADS state-of-the-world stream subscribed (wildcard)
 * to RateLimitConfig resources. Every response is a whole snapshot: it is compiled like a
 * directory of rule files and ACKed, or NACKed with the error text while the old rules stay.
 * When the stream ends it re-subscribes after the configured backoff, sending the version it
 * last accepted, so a server that comes back with the same snapshot changes nothing.
 */
export class XdsRulesClient {
  private readonly options: XdsRulesClientOptions;
  private readonly backoff: XdsBackoff;
  private client: grpc.Client | undefined;
  private stream: AdsStream | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private nackTimer: NodeJS.Timeout | undefined;
  private readonly pacer = new RejectionPacer();
  /** A snapshot is being compiled (over several turns of the event loop). */
  private compiling = false;
  /** The newest response that arrived while compiling: the only one compiled next. */
  private pending: { readonly stream: AdsStream; readonly response: DiscoveryResponse } | undefined;
  private acceptedVersion = '';
  private closed = false;

  constructor(options: XdsRulesClientOptions) {
    this.options = options;
    this.backoff = new XdsBackoff(options.settings.backoff);
  }

  /** Opens the channel and subscribes; rules arrive later through onLoaded. Throws SettingsError only for unreadable TLS files. */
  start(): void {
    const { settings, logger } = this.options;
    const Client = loadAdsClient();
    this.client = new Client(settings.serverUrl, channelCredentials(settings.tls), channelOptions(settings));
    logger.info('xDS: subscribing to rate limit configurations', { server: settings.serverUrl, node: settings.nodeId });
    this.subscribe();
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.retryTimer);
    clearTimeout(this.nackTimer);
    this.stream?.cancel();
    this.stream = undefined;
    this.client?.close();
  }

  private subscribe(): void {
    if (this.closed || !this.client) return;
    const metadata = new grpc.Metadata({ waitForReady: true });
    for (const [key, value] of Object.entries(this.options.settings.additionalHeaders)) metadata.set(key, value);
    const client = this.client as grpc.Client & { StreamAggregatedResources(metadata: grpc.Metadata): AdsStream };
    const stream = client.StreamAggregatedResources(metadata);
    this.stream = stream;
    let ended = false;
    const onEnd = (reason: string): void => {
      if (ended) return;
      ended = true;
      this.streamEnded(stream, reason);
    };
    stream.on('data', (response: DiscoveryResponse) => this.onResponse(stream, response));
    stream.on('error', (err: Error) => onEnd(err.message));
    stream.on('end', () => onEnd('stream closed by the server'));
    // The first request of a stream carries the last accepted version and no nonce.
    this.send(stream, { version_info: this.acceptedVersion, response_nonce: '' });
  }

  private onResponse(stream: AdsStream, response: DiscoveryResponse): void {
    if (stream !== this.stream || this.closed) return;
    // A newer response supersedes a NACK still waiting for an older one.
    clearTimeout(this.nackTimer);
    if (this.compiling) {
      // Coalesce: updates that arrive meanwhile replace each other; the rules in force serve.
      this.pending = { stream, response };
      return;
    }
    void this.handle(stream, response);
  }

  /** Compiles one response, in slices, and answers it; then the newest that arrived meanwhile, if any. */
  private async handle(stream: AdsStream, response: DiscoveryResponse): Promise<void> {
    this.compiling = true;
    let key: string;
    let outcome: { rules: RuleSet } | { error: Error } | { rejected: string };
    try {
      key = await runInSlices(snapshotKeySteps(response));
      outcome = await this.compile(key, response);
    } finally {
      this.compiling = false;
    }
    const next = this.pending;
    this.pending = undefined;
    if (stream === this.stream && !this.closed) {
      // Already rejected: NACKed again, paced, without being compiled, logged or counted again.
      if ('rejected' in outcome) {
        if (next === undefined) this.scheduleNack(stream, response.nonce, outcome.rejected);
      } else this.answer(stream, response, key, outcome, next === undefined);
    }
    if (next !== undefined && next.stream === this.stream && !this.closed) await this.handle(next.stream, next.response);
  }

  private async compile(key: string, response: DiscoveryResponse): Promise<{ rules: RuleSet } | { error: Error } | { rejected: string }> {
    const rejected = this.pacer.rejected(key);
    if (rejected !== undefined) return { rejected };
    try {
      const options = { mergeDomainConfig: this.options.mergeDomainConfig, maxResources: this.options.settings.maxResources };
      return { rules: await runInSlices(snapshotSteps(response.resources, options)) };
    } catch (err) {
      return { error: err instanceof Error ? err : new Error(String(err)) };
    }
  }

  /**
   * Swaps in the rules (ACK) or keeps the old ones (NACK). A response already superseded by a
   * newer one is not answered: the server waits for an answer to its latest nonce only.
   */
  private answer(
    stream: AdsStream,
    response: DiscoveryResponse,
    key: string,
    outcome: { rules: RuleSet } | { error: Error },
    latest: boolean,
  ): void {
    if ('error' in outcome) {
      const report = this.pacer.reject(key, outcome.error.message);
      if (latest) this.scheduleNack(stream, response.nonce, outcome.error.message);
      this.options.onError(outcome.error, report);
      return;
    }
    this.pacer.accepted();
    clearTimeout(this.nackTimer);
    this.acceptedVersion = response.version_info;
    this.backoff.reset();
    if (latest) this.send(stream, { version_info: response.version_info, response_nonce: response.nonce });
    this.options.onLoaded(outcome.rules);
  }

  /**
   * NACKs go out at most every NACK_INTERVAL_MS whatever the snapshots say: a management server
   * answers each NACK with a snapshot at once (go-control-plane does), so this paces the whole
   * exchange, two alternating bad snapshots included.
   */
  private scheduleNack(stream: AdsStream, nonce: string, message: string): void {
    clearTimeout(this.nackTimer);
    this.nackTimer = setTimeout(() => {
      if (stream !== this.stream || this.closed) return;
      this.pacer.nackSent();
      this.nack(stream, nonce, message);
    }, this.pacer.nackDelayMs());
    this.nackTimer.unref();
  }

  /** Rejects the response `nonce` names; the version stays the one last accepted. */
  private nack(stream: AdsStream, nonce: string, message: string): void {
    this.send(stream, { version_info: this.acceptedVersion, response_nonce: nonce, error_detail: { code: 0, message } });
  }

  private send(stream: AdsStream, request: Pick<DiscoveryRequest, 'version_info' | 'response_nonce' | 'error_detail'>): void {
    const { nodeId, nodeMetadata } = this.options.settings;
    const fields: Record<string, { stringValue: string }> = {};
    for (const [key, value] of Object.entries(nodeMetadata)) fields[key] = { stringValue: value };
    stream.write({ ...request, node: { id: nodeId, metadata: { fields } }, type_url: RATE_LIMIT_CONFIG_TYPE_URL });
  }

  private streamEnded(stream: AdsStream, reason: string): void {
    if (stream !== this.stream || this.closed) return;
    this.stream = undefined;
    const waitMs = this.backoff.next();
    this.options.logger.warn(`xDS: stream to the management server ended (${reason}); re-subscribing in ${Math.round(waitMs)} ms`);
    this.retryTimer = setTimeout(() => this.subscribe(), waitMs);
    this.retryTimer.unref();
  }
}
