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
  process.stderr.write('floodgate: building dist/ (src/ changed)\n');
  const tsc = require.resolve('typescript/bin/tsc', { paths: [root] });
  const built = spawnSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json')], { stdio: ['ignore', 2, 2] });
  if (built.status !== 0) {
    process.stderr.write('floodgate: the TypeScript build failed\n');
    process.exit(2);
  }
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
