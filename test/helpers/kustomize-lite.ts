// Renders a kustomization the way `kubectl kustomize` does for the features deploy/kubernetes
// uses (resources: files and directories, components, patches by kind and name with a
// strategic merge of maps, `images:` rewriting the containers' images), so the tests need no kubectl. Anything else in a kustomization
// file is refused, so a new feature cannot be silently ignored here.
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';

export type Manifest = Record<string, any>;

const KNOWN_FIELDS = new Set(['apiVersion', 'kind', 'resources', 'components', 'patches', 'images']);

function documents(path: string): Manifest[] {
  return parseAllDocuments(readFileSync(path, 'utf8'))
    .map((d) => d.toJS() as Manifest)
    .filter((d) => d !== null);
}

function merge(target: Manifest, patch: Manifest): Manifest {
  const out: Manifest = { ...target };
  for (const [k, v] of Object.entries(patch)) {
    out[k] =
      v !== null && typeof v === 'object' && !Array.isArray(v) && typeof out[k] === 'object' && !Array.isArray(out[k])
        ? merge(out[k] as Manifest, v as Manifest)
        : v;
  }
  return out;
}

export function kustomize(dir: string): Manifest[] {
  const k = documents(join(dir, 'kustomization.yaml'))[0] as Manifest;
  for (const field of Object.keys(k)) if (!KNOWN_FIELDS.has(field)) throw new Error(`${dir}: kustomize-lite does not know '${field}'`);
  let objects: Manifest[] = [];
  for (const r of (k['resources'] ?? []) as string[]) {
    const path = join(dir, r);
    objects.push(...(statSync(path).isDirectory() ? kustomize(path) : documents(path)));
  }
  for (const c of (k['components'] ?? []) as string[]) objects.push(...kustomize(join(dir, c)));
  for (const p of (k['patches'] ?? []) as { path: string }[]) {
    for (const patch of documents(join(dir, p.path))) {
      const matches = objects.filter((o) => o['kind'] === patch['kind'] && o['metadata']?.name === patch['metadata']?.name);
      if (matches.length !== 1) throw new Error(`${dir}: patch ${p.path} matches ${matches.length} objects`);
      objects = objects.map((o) => (o === matches[0] ? merge(o, patch) : o));
    }
  }
  for (const image of (k['images'] ?? []) as KustomizeImage[]) objects = objects.map((o) => withImage(o, image));
  return objects;
}

interface KustomizeImage {
  readonly name: string;
  readonly newName?: string;
  readonly newTag?: string;
  readonly digest?: string;
}

/** kustomize's `images:` on one object: every container (and init container) whose image name is `name`. */
function withImage(object: Manifest, image: KustomizeImage): Manifest {
  const podSpec = (object['spec']?.template?.spec ?? object['spec']?.jobTemplate?.spec?.template?.spec) as Manifest | undefined;
  if (podSpec === undefined) return object;
  const rewrite = (c: Manifest): Manifest => {
    const ref = c['image'] as string;
    const m = /^(.*?)(?::([\w][\w.-]*))?(?:@(sha256:[0-9a-f]{64}))?$/.exec(ref);
    if (m === null || m[1] !== image.name) return c;
    const name = image.newName ?? image.name;
    const tail = image.digest ? `@${image.digest}` : image.newTag ? `:${image.newTag}` : m[3] ? `@${m[3]}` : m[2] ? `:${m[2]}` : '';
    return { ...c, image: `${name}${tail}` };
  };
  const spec: Manifest = { ...podSpec, containers: (podSpec['containers'] as Manifest[]).map(rewrite) };
  if (podSpec['initContainers']) spec['initContainers'] = (podSpec['initContainers'] as Manifest[]).map(rewrite);
  const copy = structuredClone(object);
  if (copy['spec'].template) copy['spec'].template.spec = spec;
  else copy['spec'].jobTemplate.spec.template.spec = spec;
  return copy;
}
