#!/usr/bin/env node
// The `floodgate` command. It runs the compiled code in dist/. In a checkout (src/ present),
// dist/ is built first when it is missing or older than any source file, so `npx floodgate`
// works right after `npm ci` and never runs stale code; an installed package ships dist/ only.
'use strict';
const { existsSync, readdirSync, statSync } = require('node:fs');
const { join } = require('node:path');
const { spawnSync } = require('node:child_process');

const root = join(__dirname, '..');
const entry = join(root, 'dist', 'src', 'cli', 'main.js');
const sources = join(root, 'src');

/** Newest mtime (ms) of the files under `dir`, depth-bounded. */
function newestMtime(dir, depth) {
  let newest = 0;
  for (const item of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, item.name);
    if (item.isDirectory()) {
      if (depth < 8) newest = Math.max(newest, newestMtime(path, depth + 1));
    } else {
      newest = Math.max(newest, statSync(path).mtimeMs);
    }
  }
  return newest;
}

function stale() {
  if (!existsSync(sources)) return false;
  if (!existsSync(entry)) return true;
  return newestMtime(sources, 0) > statSync(entry).mtimeMs;
}

if (stale()) {
  // Said before the compiler starts: on a first start it runs ~10 s, silent, before anything else.
  process.stderr.write(
    existsSync(entry)
      ? 'floodgate: src/ changed since the last build: compiling into dist/\n'
      : 'floodgate: first start: compiling the TypeScript sources into dist/ (about 10 s, once)\n',
  );
  const started = Date.now();
  const tsc = require.resolve('typescript/bin/tsc', { paths: [root] });
  const built = spawnSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json')], { stdio: ['ignore', 2, 2] });
  if (built.status !== 0) {
    process.stderr.write('floodgate: the TypeScript build failed\n');
    process.exit(2);
  }
  process.stderr.write(`floodgate: compiled in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
}

require(entry)
  .runCli(process.argv.slice(2))
  .then(
    (code) => {
      if (code !== undefined) process.exitCode = code;
    },
    (err) => {
      process.stderr.write(`floodgate: ${err && err.stack ? err.stack : err}\n`);
      process.exitCode = 2;
    },
  );
