// A local ESLint rule: no import cycle among the project's own modules, type-only imports
// included. import-x/no-cycle skips `import type`, but a type-only cycle still ties two modules
// together: neither can be understood or moved without the other.
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';

/** path -> { mtimeMs, imports: resolved absolute paths } */
const cache = new Map();

function sourceFiles(dir) {
  const out = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      if (entry.name !== 'node_modules' && !entry.name.startsWith('.')) out.push(...sourceFiles(path));
    } else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) {
      out.push(path);
    }
  }
  return out;
}

function resolveRelative(from, spec) {
  if (!spec.startsWith('.')) return undefined;
  const base = resolve(dirname(from), spec);
  for (const candidate of [base, `${base}.ts`, join(base, 'index.ts')]) {
    try {
      if (statSync(candidate).isFile()) return candidate;
    } catch {
      // not this form
    }
  }
  return undefined;
}

function importsOf(path) {
  const mtimeMs = statSync(path).mtimeMs;
  const cached = cache.get(path);
  if (cached !== undefined && cached.mtimeMs === mtimeMs) return cached.imports;
  // preProcessFile lists every import and re-export, `import type` and import() included.
  const info = ts.preProcessFile(readFileSync(path, 'utf8'), true, true);
  const imports = [...new Set(info.importedFiles.map((f) => resolveRelative(path, f.fileName)).filter((p) => p !== undefined))];
  cache.set(path, { mtimeMs, imports });
  return imports;
}

/** The shortest import path from `start` back to `target`, or undefined. */
function pathBack(start, target, graph) {
  const previous = new Map([[start, undefined]]);
  const queue = [start];
  while (queue.length > 0) {
    const node = queue.shift();
    if (node === target) {
      const path = [];
      for (let n = node; n !== undefined; n = previous.get(n)) path.unshift(n);
      return path;
    }
    for (const next of graph.get(node) ?? []) {
      if (!previous.has(next)) {
        previous.set(next, node);
        queue.push(next);
      }
    }
  }
  return undefined;
}

export default {
  meta: {
    type: 'problem',
    docs: { description: 'Forbid import cycles between project modules, type-only imports included' },
    schema: [{ type: 'object', properties: { roots: { type: 'array', items: { type: 'string' } } }, additionalProperties: false }],
    messages: { cycle: 'import cycle: {{cycle}}' },
  },
  create(context) {
    const filename = context.physicalFilename;
    const cwd = context.cwd;
    const roots = (context.options[0]?.roots ?? ['src']).map((r) => resolve(cwd, r));
    const graph = new Map();
    for (const root of roots) for (const file of sourceFiles(root)) graph.set(file, importsOf(file));
    const check = (node) => {
      if (node.source === null || node.source === undefined || typeof node.source.value !== 'string') return;
      const target = resolveRelative(filename, node.source.value);
      if (target === undefined || !graph.has(target)) return;
      const back = pathBack(target, filename, graph);
      if (back === undefined) return;
      const cycle = [filename, ...back].map((p) => relative(cwd, p)).join(' -> ');
      context.report({ node: node.source, messageId: 'cycle', data: { cycle } });
    };
    return {
      ImportDeclaration: check,
      ExportNamedDeclaration: check,
      ExportAllDeclaration: check,
      ImportExpression: check,
    };
  },
};
