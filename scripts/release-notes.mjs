#!/usr/bin/env node
// The release notes of a version: its CHANGELOG.md entry, printed to stdout. The release
// workflow (.github/workflows/release.yml) publishes them; test/deploy/release.test.ts runs this.
//
//   node scripts/release-notes.mjs                # the top entry, which must be package.json's version
//   node scripts/release-notes.mjs --check v1.2.3 # also: the tag is v<version>, Chart.yaml's version and
//                                                 # appVersion agree, and the entry is dated (not Unreleased)
//
// A release is a version bump, a CHANGELOG entry and a tag; this refuses any of them without
// the others. No dependencies: the release workflow runs it before `npm ci`.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const read = (...parts) => readFileSync(join(root, ...parts), 'utf8');

/** Every `## [x.y.z] - date` entry of CHANGELOG.md, top first, with its text. */
export function changelogEntries(text) {
  const entries = [];
  const heading = /^## \[([^\]]+)\](?: - (.+))?$/gm;
  const found = [...text.matchAll(heading)];
  for (const [i, m] of found.entries()) {
    const end = i + 1 < found.length ? found[i + 1].index : text.length;
    const body = text.slice(m.index + m[0].length, end).replace(/^\n+|\s+$/g, '');
    entries.push({ version: m[1], date: (m[2] ?? '').trim(), body });
  }
  return entries;
}

/** A top-level `key: value` of Chart.yaml (quotes dropped). */
function chartField(text, key) {
  const m = new RegExp(`^${key}:\\s*"?([^"\\s#]+)"?\\s*(#.*)?$`, 'm').exec(text);
  return m?.[1];
}

function fail(message) {
  process.stderr.write(`release-notes: ${message}\n`);
  process.exit(1);
}

function main(argv) {
  const version = JSON.parse(read('package.json')).version;
  const entries = changelogEntries(read('CHANGELOG.md'));
  const top = entries[0];
  if (top === undefined) fail('CHANGELOG.md has no "## [x.y.z] - date" entry');
  if (top.version !== version) fail(`the top CHANGELOG.md entry is ${top.version}, package.json says ${version}: add the ${version} entry`);
  if (top.body === '') fail(`the CHANGELOG.md entry of ${version} is empty`);
  if (argv[0] === '--check') {
    const tag = argv[1] ?? '';
    if (tag !== `v${version}`) fail(`the tag is '${tag}', package.json's version ${version} wants v${version}`);
    const chart = read('deploy', 'helm', 'floodgate', 'Chart.yaml');
    for (const key of ['version', 'appVersion']) {
      if (chartField(chart, key) !== version) fail(`Chart.yaml ${key} is ${chartField(chart, key)}, package.json says ${version}`);
    }
    if (!/^\d{4}-\d{2}-\d{2}$/.test(top.date))
      fail(`the CHANGELOG.md entry of ${version} has no release date (found '${top.date}'): '## [${version}] - YYYY-MM-DD'`);
  } else if (argv.length > 0) {
    fail(`usage: release-notes.mjs [--check v<version>]`);
  }
  process.stdout.write(`${top.body}\n`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) main(process.argv.slice(2));
