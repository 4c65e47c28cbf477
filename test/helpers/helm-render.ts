// Renders deploy/helm/floodgate with Helm's own engine: test/helm-render is a small Go program
// on helm.sh/helm/v3 (chart loader, values coalescing and values.schema.json validation, the
// template engine in strict mode, the chart linter). It is built with `go build` once into a
// cache directory keyed by its sources, like the xDS test server; the first build downloads
// Helm's module through the Go module proxy and takes minutes, later ones reuse ~/.cache.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import type { Manifest } from './floodgate-kit-checks';

const SOURCE_DIR = join(__dirname, '..', 'helm-render');
const SOURCE_FILES = ['go.mod', 'go.sum', 'main.go'];

/** The renderer binary; a machine that cannot build it fails the test with the build's own output. */
export function helmRenderBinary(): string {
  const hash = createHash('sha256');
  for (const name of SOURCE_FILES) hash.update(readFileSync(join(SOURCE_DIR, name)));
  const cacheDir = join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'floodgate-test');
  const binary = join(cacheDir, `helm-render-${hash.digest('hex').slice(0, 16)}`);
  if (existsSync(binary)) return binary;
  mkdirSync(cacheDir, { recursive: true });
  const partial = `${binary}.${process.pid}.partial`;
  try {
    execFileSync('go', ['build', '-o', partial, '.'], { cwd: SOURCE_DIR, stdio: ['ignore', 'pipe', 'pipe'], timeout: 900_000 });
  } catch (err) {
    const failure = err as { stderr?: Buffer; message: string };
    throw new Error(`cannot build the Helm renderer (go build in ${SOURCE_DIR}): ${failure.stderr?.toString() || failure.message}`, {
      cause: err,
    });
  }
  renameSync(partial, binary);
  return binary;
}

export interface LintMessage {
  readonly severity: 'UNKNOWN' | 'INFO' | 'WARNING' | 'ERROR';
  readonly path: string;
  readonly message: string;
}

export interface HelmRendering {
  /** Every object of every template, in template-file order. */
  readonly objects: Manifest[];
  /** Template file -> rendered text. */
  readonly manifests: Record<string, string>;
  readonly notes: string;
  readonly lint: LintMessage[];
}

export class HelmRenderError extends Error {}

/**
 * `helm template <chart> --name <release> -n <namespace> -f <values>`, through Helm's code.
 * A chart that refuses the values (a `fail`, the schema) throws HelmRenderError with Helm's message.
 */
export function helmTemplate(chartDir: string, values: Record<string, unknown>, release = 'floodgate', namespace = 'rl'): HelmRendering {
  let stdout: string;
  try {
    stdout = execFileSync(helmRenderBinary(), ['-chart', chartDir, '-name', release, '-namespace', namespace], {
      input: JSON.stringify(values),
      stdio: ['pipe', 'pipe', 'pipe'],
      timeout: 60_000,
      encoding: 'utf8',
    });
  } catch (err) {
    const failure = err as { stderr?: string; message: string };
    throw new HelmRenderError(failure.stderr?.trim() || failure.message, { cause: err });
  }
  const answer = JSON.parse(stdout) as { manifests: Record<string, string>; notes: string; lint: LintMessage[] };
  const objects: Manifest[] = [];
  for (const file of Object.keys(answer.manifests).sort()) {
    for (const doc of parseAllDocuments(answer.manifests[file] as string)) {
      const problems = [...doc.errors, ...doc.warnings].map((e) => `${file}: ${e.message}`);
      if (problems.length > 0) throw new HelmRenderError(`rendered YAML does not parse cleanly:\n${problems.join('\n')}`);
      const object = doc.toJS() as Manifest | null;
      if (object !== null) objects.push(object);
    }
  }
  return { objects, manifests: answer.manifests, notes: answer.notes, lint: answer.lint };
}
