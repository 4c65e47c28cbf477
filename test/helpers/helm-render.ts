// Renders deploy/helm/floodgate with Helm's own engine: test/helm-render is a small Go program
// on helm.sh/helm/v3 (chart loader, values coalescing and values.schema.json validation, the
// template engine in strict mode, the chart linter), built by goTestProgram once into a cache
// directory keyed by its sources; the first build downloads Helm's module through the Go module
// proxy and compiles it (about 5 minutes on a busy 2-core machine), later ones reuse ~/.cache.
import { execFileSync } from 'node:child_process';
import { parseAllDocuments } from 'yaml';
import type { Manifest } from './floodgate-kit-checks';
import { goTestProgram } from './go-test-program';

/** The renderer binary; a machine that cannot build it fails the test with the build's own output. */
export function helmRenderBinary(): string {
  return goTestProgram('helm-render', ['go.mod', 'go.sum', 'main.go']);
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
 * `helm template <chart> --name <release> -n <namespace> -f <values> [--set <s>...]`, through Helm's code.
 * A chart that refuses the values (a `fail`, the schema) throws HelmRenderError with Helm's message.
 */
export function helmTemplate(
  chartDir: string,
  values: Record<string, unknown>,
  release = 'floodgate',
  namespace = 'rl',
  sets: readonly string[] = [],
): HelmRendering {
  let stdout: string;
  try {
    stdout = execFileSync(
      helmRenderBinary(),
      ['-chart', chartDir, '-name', release, '-namespace', namespace, ...sets.flatMap((s) => ['-set', s])],
      {
        input: JSON.stringify(values),
        stdio: ['pipe', 'pipe', 'pipe'],
        timeout: 60_000,
        encoding: 'utf8',
      },
    );
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
