#!/usr/bin/env bash
# The whole test suite: unit, integration (real redis-server processes) and end-to-end (real
# gRPC against the real server). Used by `npm test` and by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "redis-server is missing; installing it with apt-get" >&2
    apt-get update -qq && apt-get install -y redis-server >&2
  else
    echo "The tests need redis-server and redis-cli. Install them with:" >&2
    echo "  sudo apt-get update -qq && sudo apt-get install -y redis-server" >&2
    exit 1
  fi
fi

[ -d node_modules ] || npm ci
# The SIGTERM end-to-end tests run the built server as a real process.
npm run --silent build
npx tsc -p tsconfig.json --noEmit

results=$(mktemp)
status=0
npx vitest run --reporter=default --reporter=json --outputFile="$results" "$@" || status=$?
# A plain closing line that any CI can read, whatever vitest printed above it.
node -e '
  const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  console.log(`tests: ${r.numPassedTests} passed, ${r.numFailedTests} failed` + (r.numPendingTests ? `, ${r.numPendingTests} skipped` : ""));
' "$results" 2>/dev/null || true
rm -f "$results"
exit "$status"
