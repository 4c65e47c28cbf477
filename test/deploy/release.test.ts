// The release as code (issue 28, "Something to install"): the workflows pass actionlint, the
// image name and the version agree everywhere they are written, a release is a version bump, a
// CHANGELOG entry and a tag together, and the project files a team looks for exist. No registry
// is reached: everything here reads the repository, builds actionlint from the Go module proxy
// and runs floodgate's own CLI.
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { runCli } from '../../src/cli/main';
import { projectRoot } from '../../src/base/paths';
import { goInstalledTool } from '../helpers/go-install-tool';
import { findOne, floodgateKit } from '../helpers/floodgate-kit-checks';
import { kustomize } from '../helpers/kustomize-lite';

type Obj = Record<string, any>;

const ACTIONLINT = 'github.com/rhysd/actionlint/cmd/actionlint';
const ACTIONLINT_VERSION = 'v1.7.12';

const path = (...parts: string[]): string => join(projectRoot, ...parts);
const read = (...parts: string[]): string => readFileSync(path(...parts), 'utf8');
const yamlOf = (...parts: string[]): Obj => parse(read(...parts)) as Obj;

const WORKFLOWS_DIR = path('.github', 'workflows');
const workflowFiles = (): string[] =>
  readdirSync(WORKFLOWS_DIR)
    .filter((n) => /\.ya?ml$/.test(n))
    .sort();

const pkg = JSON.parse(read('package.json')) as { version: string; repository?: { type: string; url: string }; license: string };
const VERSION = pkg.version;

/** The one published image name: the release workflow's IMAGE. */
const releaseWorkflow = (): Obj => yamlOf('.github', 'workflows', 'release.yml');
const IMAGE = (): string => releaseWorkflow()['env'].IMAGE as string;

function steps(workflow: Obj): Obj[] {
  return Object.values(workflow['jobs'] as Record<string, Obj>).flatMap((job) => (job['steps'] ?? []) as Obj[]);
}
const runText = (workflow: Obj): string =>
  steps(workflow)
    .map((s) => (s['run'] as string | undefined) ?? '')
    .join('\n');

function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...filesUnder(p));
    else out.push(p);
  }
  return out;
}

describe('project files', () => {
  it('LICENSE is the full Apache License 2.0 text that package.json claims', () => {
    expect(pkg.license).toBe('Apache-2.0');
    const text = read('LICENSE');
    expect(text).toContain('Apache License');
    expect(text).toContain('Version 2.0, January 2004');
    expect(text).toContain('TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION');
    for (let section = 1; section <= 9; section++) expect(text).toMatch(new RegExp(`^\\s+${section}\\. [A-Z]`, 'm'));
    expect(text).toContain('END OF TERMS AND CONDITIONS');
    expect(text.length).toBeGreaterThan(11_000);
  });

  it('NOTICE, SECURITY.md (how to report, which versions get fixes), CONTRIBUTING.md (tests, ARCHITECTURE.md) exist', () => {
    expect(read('NOTICE')).toMatch(/Apache License/);
    const security = read('SECURITY.md');
    expect(security).toMatch(/## Reporting a vulnerability/);
    expect(security).toMatch(/## Supported versions/);
    const contributing = read('CONTRIBUTING.md');
    expect(contributing).toContain('](ARCHITECTURE.md)');
    expect(contributing).toContain('npm test');
    expect(contributing).toMatch(/## Releasing/);
  });

  it('package.json names the repository; Chart.yaml has home, sources and a maintainer pointing at the issues', () => {
    const repo = pkg.repository?.url.replace(/^git\+/, '').replace(/\.git$/, '');
    expect(repo).toMatch(/^https:\/\/github\.com\/[\w.-]+\/[\w.-]+$/);
    const chart = yamlOf('deploy', 'helm', 'floodgate', 'Chart.yaml');
    expect(chart['home']).toBe(repo);
    expect(chart['sources']).toContain(repo);
    expect(chart['maintainers']).toEqual([expect.objectContaining({ url: `${repo}/issues` })]);
  });
});

describe('the version, the CHANGELOG and the tag go together', () => {
  const notes = (...args: string[]) =>
    spawnSync(process.execPath, [path('scripts', 'release-notes.mjs'), ...args], { encoding: 'utf8', cwd: projectRoot });

  it('the top CHANGELOG.md entry is package.json’s version, and its text is the release notes', () => {
    const top = /^## \[([^\]]+)\]/m.exec(read('CHANGELOG.md'));
    expect(top?.[1], 'the top "## [x.y.z]" entry of CHANGELOG.md').toBe(VERSION);
    const out = notes();
    expect(out.stderr).toBe('');
    expect(out.status).toBe(0);
    expect(out.stdout.trim().length).toBeGreaterThan(0);
    expect(read('CHANGELOG.md')).toContain(out.stdout.trim());
  });

  it('a tag that is not v<version> is refused before anything is built', () => {
    const out = notes('--check', 'v9.9.9');
    expect(out.status).toBe(1);
    expect(out.stderr).toContain(`package.json's version ${VERSION} wants v${VERSION}`);
  });

  it('on the tag, a dated entry passes and an Unreleased one is refused (the workflow’s first step)', () => {
    // A copy of the release's files, with the entry dated as CONTRIBUTING.md says to before tagging.
    const dir = mkdtempSync(join(tmpdir(), 'floodgate-release-'));
    try {
      mkdirSync(join(dir, 'scripts'));
      mkdirSync(join(dir, 'deploy', 'helm', 'floodgate'), { recursive: true });
      copyFileSync(path('scripts', 'release-notes.mjs'), join(dir, 'scripts', 'release-notes.mjs'));
      copyFileSync(path('package.json'), join(dir, 'package.json'));
      copyFileSync(path('deploy', 'helm', 'floodgate', 'Chart.yaml'), join(dir, 'deploy', 'helm', 'floodgate', 'Chart.yaml'));
      const changelog = read('CHANGELOG.md');
      const check = (text: string) => {
        writeFileSync(join(dir, 'CHANGELOG.md'), text);
        return spawnSync(process.execPath, [join(dir, 'scripts', 'release-notes.mjs'), '--check', `v${VERSION}`], { encoding: 'utf8' });
      };
      const dated = check(
        changelog.replace(new RegExp(`^## \\[${VERSION.replace(/\./g, '\\.')}\\] - .*$`, 'm'), `## [${VERSION}] - 2026-12-01`),
      );
      expect(dated.stderr).toBe('');
      expect(dated.status).toBe(0);
      const undated = check(
        changelog.replace(new RegExp(`^## \\[${VERSION.replace(/\./g, '\\.')}\\] - .*$`, 'm'), `## [${VERSION}] - Unreleased`),
      );
      expect(undated.status).toBe(1);
      expect(undated.stderr).toContain('has no release date');
      // A version bump without its entry is refused too.
      const bumped = check(changelog.replace(/^## \[/m, '## [0.0.0-old] - 2020-01-01\n\nold\n\n## ['));
      expect(bumped.status).toBe(1);
      expect(bumped.stderr).toContain(`the top CHANGELOG.md entry is 0.0.0-old, package.json says ${VERSION}`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('Chart.yaml version and appVersion are package.json’s version', () => {
    const chart = yamlOf('deploy', 'helm', 'floodgate', 'Chart.yaml');
    expect(chart['version']).toBe(VERSION);
    expect(chart['appVersion']).toBe(VERSION);
  });

  it('floodgate --version prints package.json’s version', async () => {
    let out = '';
    const code = await runCli(['--version'], { out: (t) => void (out += t), err: (t) => void (out += t) });
    expect(code).toBe(0);
    expect(out).toBe(`floodgate ${VERSION}\n`);
  });
});

describe('one image name, one version, everywhere', () => {
  it('the release workflow publishes to ghcr.io under the repository’s owner', () => {
    const owner = /github\.com\/([\w.-]+)\//.exec(pkg.repository?.url ?? '')?.[1]?.toLowerCase();
    expect(IMAGE()).toBe(`ghcr.io/${owner}/floodgate`);
    expect(releaseWorkflow()['env'].CHART_REPOSITORY).toBe(`oci://ghcr.io/${owner}/charts`);
  });

  it('kustomize: `images:` in the base is the one place, and the rendered Deployment runs IMAGE:version', () => {
    const k = yamlOf('deploy', 'kubernetes', 'base', 'kustomization.yaml');
    expect(k['images']).toEqual([{ name: 'floodgate', newName: IMAGE(), newTag: VERSION }]);
    for (const dir of ['deploy/kubernetes', 'deploy/kubernetes/overlays/redis-cluster', 'deploy/kubernetes/overlays/demo']) {
      expect(floodgateKit(kustomize(path(dir))).container['image'], dir).toBe(`${IMAGE()}:${VERSION}`);
    }
  });

  it('Helm: image.repository is IMAGE and the tag defaults to appVersion', () => {
    const values = yamlOf('deploy', 'helm', 'floodgate', 'values.yaml');
    expect(values['image']).toMatchObject({ repository: IMAGE(), tag: '', digest: '' });
    expect(read('deploy', 'helm', 'floodgate', 'templates', '_helpers.tpl')).toContain('(default .Chart.AppVersion .Values.image.tag)');
  });

  it('Envoy Gateway values: the rate-limit container is IMAGE:version', () => {
    const values = yamlOf('deploy', 'gateways', 'envoy-gateway-values.yaml');
    expect(values['config'].envoyGateway.provider.kubernetes.rateLimitDeployment.container.image).toBe(`${IMAGE()}:${VERSION}`);
  });

  it('every floodgate image with a version tag in deploy/, docs/, envoy/ and the root documents is IMAGE:version', () => {
    const files = [...filesUnder(path('deploy')), ...filesUnder(path('docs')), ...filesUnder(path('envoy'))]
      .concat(['README.md', 'CONTRIBUTING.md', 'SECURITY.md', 'CHANGELOG.md'].map((n) => path(n)))
      .filter((p) => /\.(md|ya?ml|json|tpl|txt)$|Dockerfile$/.test(p));
    const found: string[] = [];
    for (const file of files) {
      for (const m of readFileSync(file, 'utf8').matchAll(/([\w./-]*floodgate):(\d+\.\d+(?:\.\d+)?)\b/g)) {
        // `<name>:<major>.<minor>` is the moving tag the workflow also pushes.
        const name = (m[1] as string).replace(/^\/+/, ''); // oci://ghcr.io/...
        const ok = name === IMAGE() && (m[2] === VERSION || m[2] === VERSION.split('.').slice(0, 2).join('.'));
        if (!ok) found.push(`${relative(projectRoot, file)}: ${m[0]}`);
      }
    }
    expect(found, `image references other than ${IMAGE()}:${VERSION}`).toEqual([]);
  });
});

describe('.github: workflows and dependency updates', () => {
  let actionlint = '';
  beforeAll(() => {
    actionlint = goInstalledTool(ACTIONLINT, ACTIONLINT_VERSION);
  }, 600_000);

  it('actionlint finds nothing in any workflow', () => {
    const files = workflowFiles();
    expect(files).toEqual(expect.arrayContaining(['ci.yml', 'release.yml']));
    const out = spawnSync(actionlint, ['-color=false', ...files.map((f) => join(WORKFLOWS_DIR, f))], { encoding: 'utf8', cwd: projectRoot });
    expect(out.stdout + out.stderr).toBe('');
    expect(out.status).toBe(0);
    // actionlint really looks: a broken workflow fails it.
    const broken = spawnSync(actionlint, ['-color=false', '-'], {
      input: 'on: push\njobs:\n  x:\n    runs-on: ubuntu-24.04\n    steps:\n      - run: echo ${{ github.nonexistent_context_value }}\n',
      encoding: 'utf8',
    });
    expect(broken.status).not.toBe(0);
  });

  it('ci.yml runs .ci/run on every push and pull request', () => {
    const ci = yamlOf('.github', 'workflows', 'ci.yml');
    expect(Object.keys(ci['on'] as Obj).sort()).toEqual(['pull_request', 'push']);
    expect(runText(ci)).toMatch(/^\.ci\/run$/m);
  });

  it('release.yml, on a version tag: tests, multi-arch image with both tags, SBOM, provenance, cosign, chart to OCI, notes from CHANGELOG', () => {
    const wf = releaseWorkflow();
    expect(wf['on']).toEqual({ push: { tags: ['v[0-9]+.[0-9]+.[0-9]+'] } });
    const all = steps(wf);
    const run = runText(wf);
    expect(run).toMatch(/^\.ci\/run$/m);
    expect(run).toContain('node scripts/release-notes.mjs --check "$GITHUB_REF_NAME"');
    const build = all.find((s) => String(s['uses']).startsWith('docker/build-push-action@'))?.['with'] as Obj;
    expect(build).toMatchObject({
      file: 'deploy/Dockerfile',
      platforms: 'linux/amd64,linux/arm64',
      push: true,
      sbom: true,
      provenance: 'mode=max',
    });
    // The tags step: IMAGE:<version> and IMAGE:<major>.<minor>.
    expect(run).toContain('echo "tags=$IMAGE:$version,$IMAGE:${version%.*}"');
    expect(run).toContain('cosign sign --yes "$IMAGE@$DIGEST"');
    expect(all.some((s) => String(s['uses']).startsWith('actions/attest-build-provenance@'))).toBe(true);
    expect(run).toContain('helm package deploy/helm/floodgate');
    expect(run).toContain('helm push dist/chart/floodgate-"${GITHUB_REF_NAME#v}".tgz "$CHART_REPOSITORY"');
    const release = all.find((s) => String(s['uses']).startsWith('softprops/action-gh-release@'))?.['with'] as Obj;
    expect(release['body_path']).toBe('release-notes.md');
    expect(run).toMatch(/node scripts\/release-notes\.mjs --check "\$GITHUB_REF_NAME" > release-notes\.md/);
    // Least privilege: nothing by default, each job asks for what it uses.
    expect(wf['permissions']).toEqual({});
    expect(wf['jobs'].image.permissions).toMatchObject({ packages: 'write', 'id-token': 'write' });
  });

  it('every action is pinned by a full commit SHA with its version in a comment', () => {
    for (const file of workflowFiles()) {
      for (const line of read('.github', 'workflows', file).split('\n')) {
        const m = /^\s*(?:-\s+)?uses:\s*(\S+)(.*)$/.exec(line);
        if (!m) continue;
        expect(m[1], `${file}: ${line.trim()}`).toMatch(/^[\w.-]+\/[\w./-]+@[0-9a-f]{40}$/);
        expect(m[2], `${file}: ${line.trim()}`).toMatch(/^ # v\d+\.\d+\.\d+$/);
      }
    }
  });

  it('Dependabot updates npm packages, the image’s base digest and the actions', () => {
    const config = yamlOf('.github', 'dependabot.yml');
    const updates = (config['updates'] as Obj[]).map((u) => `${u['package-ecosystem']} ${u['directory']}`);
    expect(updates.sort()).toEqual([
      'docker /deploy',
      'docker /deploy/kubernetes/overlays/demo',
      'docker /deploy/kubernetes/overlays/redis-cluster',
      'github-actions /',
      'npm /',
    ]);
    // Dependabot reads literal FROM lines only (dependabot-core#2057): no ARG in FROM.
    const froms = read('deploy', 'Dockerfile')
      .split('\n')
      .filter((l) => /^FROM\s/i.test(l));
    expect(froms.length).toBeGreaterThan(0);
    for (const from of froms) expect(from).toMatch(/^FROM node:\d+-slim@sha256:[0-9a-f]{64}( AS \w+)?$/);
  });
});

// Kept here so that a reader of the release test sees how the one image is found in kustomize.
describe('kustomize-lite applies `images:` as kustomize does', () => {
  it('rewrites the container image named in `images:`, and nothing else', () => {
    const objects = kustomize(path('deploy', 'kubernetes'));
    const deployment = findOne(objects, 'Deployment', 'floodgate');
    expect(deployment['spec'].template.spec.containers[0].image).toBe(`${IMAGE()}:${VERSION}`);
    // The Deployment itself names only `floodgate`, the name `images:` rewrites.
    expect(
      (parseAllDocuments(read('deploy', 'kubernetes', 'base', 'deployment.yaml'))[0]?.toJS() as Obj).spec.template.spec.containers[0].image,
    ).toBe('floodgate');
  });
});
