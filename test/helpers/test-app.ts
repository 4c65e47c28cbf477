import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startApp, type App, type AppOptions } from '../../src/app/app';
import { createLogger, type Logger } from '../../src/base/log';
import { loadSettings } from '../../src/settings/settings';
import { rlsClient, type RlsTestClient } from './rls-client';

export interface TestApp {
  readonly app: App;
  readonly client: RlsTestClient;
  readonly rulesDir: string;
  readonly httpUrl: string;
  readonly debugUrl: string;
  writeRule(name: string, yaml: string): void;
  stop(): Promise<void>;
}

/**
 * Starts the real server in this process on ephemeral ports, with its rules in a fresh temp
 * directory (`files`), and a real gRPC client connected to it.
 */
export async function startTestApp(
  files: Record<string, string>,
  env: Record<string, string> = {},
  options: { logger?: Logger; spanExporter?: AppOptions['spanExporter']; limiter?: AppOptions['limiter'] } = {},
): Promise<TestApp> {
  const root = mkdtempSync(join(tmpdir(), 'floodgate-e2e-'));
  const rulesDir = join(root, 'config');
  mkdirSync(rulesDir);
  for (const [name, text] of Object.entries(files)) writeFileSync(join(rulesDir, name), text);
  const settings = loadSettings({
    RUNTIME_ROOT: root,
    RUNTIME_WATCH_ROOT: 'false',
    PORT: '0',
    GRPC_PORT: '0',
    GRPC_HOST: '127.0.0.1',
    HOST: '127.0.0.1',
    DEBUG_PORT: '0',
    USE_PROMETHEUS: 'false',
    // A test that wants statsd turns it on; elsewhere nothing listens on localhost:8125.
    USE_STATSD: 'false',
    LOG_LEVEL: 'ERROR',
    ...env,
  });
  const app = await startApp(settings, {
    logger: options.logger ?? createLogger('ERROR', 'text'),
    ...(options.spanExporter ? { spanExporter: options.spanExporter } : {}),
    ...(options.limiter ? { limiter: options.limiter } : {}),
  });
  const client = rlsClient(`127.0.0.1:${app.grpcPort}`);
  return {
    app,
    client,
    rulesDir,
    httpUrl: `http://127.0.0.1:${app.httpPort}`,
    debugUrl: `http://127.0.0.1:${app.debugPort}`,
    writeRule(name, yaml) {
      writeFileSync(join(rulesDir, name), yaml);
    },
    async stop() {
      client.close();
      await app.stop();
      rmSync(root, { recursive: true, force: true });
    },
  };
}
