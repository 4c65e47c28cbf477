// Lint rules that keep the layout honest. `npm run lint`; scripts/test.sh runs it before the tests.
import { readdirSync } from 'node:fs';
import js from '@eslint/js';
import { createTypeScriptImportResolver } from 'eslint-import-resolver-typescript';
import importX from 'eslint-plugin-import-x';
import tseslint from 'typescript-eslint';
import noImportCycle from './eslint/no-import-cycle.mjs';

/**
 * The layers of src/, lowest first (ARCHITECTURE.md explains them). A module may import from
 * its own layer's folders and from lower layers only. Folders that share a layer must not import
 * each other either (config/limiter and grpc/http are independent of each other).
 */
const LAYERS = [
  { name: 'domain', groups: [['src/domain']] },
  {
    name: 'base',
    groups: [['src/base', 'src/metrics']],
  },
  { name: 'rules and counting', groups: [['src/config'], ['src/limiter']] },
  { name: 'policy', groups: [['src/policy']] },
  // Operator tooling over the counter keys (orphan scan): uses the limiter's Redis client and key layout.
  { name: 'redis keys', groups: [['src/redis-keys']] },
  { name: 'service', groups: [['src/service']] },
  { name: 'rls protocol', groups: [['src/rls']] },
  { name: 'transports', groups: [['src/grpc'], ['src/http'], ['src/tracing']] },
  {
    name: 'settings',
    groups: [['src/settings']],
  },
  // The CLI sits with the app: it wires the same pieces (rules, service, limiter, settings) for one command.
  {
    name: 'app',
    groups: [['src/app', 'src/main.ts', 'src/cli']],
  },
];

// Every entry of src/ must sit in a layer: a new top-level file or folder is placed on purpose.
const placed = new Set(LAYERS.flatMap((l) => l.groups.flat()));
const unplaced = readdirSync(new URL('./src', import.meta.url)).filter((name) => !placed.has(`src/${name}`));
if (unplaced.length > 0) throw new Error(`eslint.config.mjs: add ${unplaced.map((n) => `src/${n}`).join(', ')} to a layer of LAYERS`);

// Plain paths (no globs): a folder covers everything below it.
const asTarget = (p) => `./${p}`;

function layerZones() {
  const zones = [];
  LAYERS.forEach((layer, i) => {
    const above = LAYERS.slice(i + 1).flatMap((l) => l.groups.flat());
    for (const group of layer.groups) {
      const peers = layer.groups.filter((g) => g !== group).flat();
      if (above.length > 0) {
        zones.push({
          target: group.map(asTarget),
          from: above.map(asTarget),
          message: `the ${layer.name} layer must not import from a layer above it`,
        });
      }
      if (peers.length > 0) {
        zones.push({
          target: group.map(asTarget),
          from: peers.map(asTarget),
          message: `${group.join(', ')} must not import from ${peers.join(', ')}`,
        });
      }
    }
  });
  zones.push({ target: './src', from: './test', message: 'production code must not import test code' });
  return zones;
}

export default tseslint.config(
  // scripts/*.d.mts: types of a script for the tests that import it; tsc checks them.
  { ignores: ['dist/**', 'node_modules/**', 'bench/results/**', 'coverage/**', 'scripts/*.d.mts'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked.map((config) => ({ ...config, files: ['**/*.ts'] })),
  {
    files: ['**/*.ts'],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    plugins: { 'import-x': importX, floodgate: { rules: { 'no-import-cycle': noImportCycle } } },
    settings: {
      'import-x/resolver-next': [createTypeScriptImportResolver({ project: 'tsconfig.json' })],
    },
    rules: {
      'import-x/no-restricted-paths': ['error', { zones: layerZones() }],
      'floodgate/no-import-cycle': ['error', { roots: ['src', 'test'] }],
      '@typescript-eslint/no-floating-promises': 'error',
      'max-params': ['error', 5],
      complexity: ['error', 15],
    },
  },
  {
    // vitest's asymmetric matchers (expect.stringMatching, expect.any...) are typed any by design.
    files: ['test/**/*.ts'],
    rules: { '@typescript-eslint/no-unsafe-assignment': 'off' },
  },
  {
    // Walks arbitrary parsed YAML (Kubernetes manifests, Envoy config); it asserts each shape it uses.
    files: [
      'test/unit/deploy-configs.test.ts',
      'test/integration/deploy-kit.test.ts',
      'test/integration/helm-chart.test.ts',
      'test/deploy/*.test.ts',
      'test/helpers/kustomize-lite.ts',
      'test/helpers/floodgate-kit-checks.ts',
      'test/helpers/helm-render.ts',
    ],
    rules: {
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
    },
  },
  {
    // The test oracle stays one obviously-right function per algorithm; split up it would be harder to check by eye.
    files: ['test/helpers/reference-model.ts'],
    rules: { complexity: 'off' },
  },
  {
    // Plain JavaScript (this file, scripts, the local rule): no type information.
    files: ['**/*.{js,mjs,cjs,mts}'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: { globals: { process: 'readonly', console: 'readonly', URL: 'readonly', require: 'readonly', __dirname: 'readonly' } },
  },
);
