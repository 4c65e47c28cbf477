#!/usr/bin/env bash
# The whole test suite: unit, integration (real redis-server processes) and end-to-end (real
# gRPC against the real server). Used by `npm test` and by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."

# Real redis-server/redis-cli for the integration suites; openssl makes the TLS certificates of
# the TLS tests; pgrep (procps) looks at worker processes.
missing=()
for tool in redis-server redis-cli openssl pgrep; do command -v "$tool" >/dev/null 2>&1 || missing+=("$tool"); done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "missing ${missing[*]}; installing with apt-get" >&2
    apt-get update -qq && apt-get install -y redis-server openssl procps >&2
  else
    echo "The tests need ${missing[*]}. Install them with:" >&2
    echo "  sudo apt-get update -qq && sudo apt-get install -y redis-server openssl procps" >&2
    exit 1
  fi
fi

[ -d node_modules ] || npm ci
# The SIGTERM end-to-end tests run the built server as a real process.
npm run --silent build
npx tsc -p tsconfig.json --noEmit

# Suites that measure latency under injected faults run alone after the rest: on a 2-core
# machine, another suite's Redis cluster starting beside them would stall the very processes
# whose deadlines they measure.
TIMING_SENSITIVE=(
  test/integration/redis-backend-failover.test.ts
  test/integration/redis-backend-down.test.ts
  test/integration/redis-backend-hang.test.ts
  test/integration/xds-rules.test.ts
)

results1=$(mktemp)
results2=$(mktemp)
status=0
if [ $# -gt 0 ]; then
  npx vitest run --reporter=default --reporter=json --outputFile="$results1" "$@" || status=$?
  echo '{"numPassedTests":0,"numFailedTests":0,"numPendingTests":0}' > "$results2"
else
  excludes=()
  for f in "${TIMING_SENSITIVE[@]}"; do excludes+=(--exclude "$f"); done
  npx vitest run --reporter=default --reporter=json --outputFile="$results1" "${excludes[@]}" || status=$?
  npx vitest run --reporter=default --reporter=json --outputFile="$results2" --maxWorkers=1 "${TIMING_SENSITIVE[@]}" || status=$?
fi
# A plain closing line that any CI can read, whatever vitest printed above it.
node -e '
  const fs = require("fs");
  const rs = process.argv.slice(1).map((f) => { try { return JSON.parse(fs.readFileSync(f, "utf8")); } catch { return { numPassedTests: 0, numFailedTests: 1, numPendingTests: 0 }; } });
  const sum = (k) => rs.reduce((n, r) => n + (r[k] || 0), 0);
  const skipped = sum("numPendingTests");
  console.log(`tests: ${sum("numPassedTests")} passed, ${sum("numFailedTests")} failed` + (skipped ? `, ${skipped} skipped` : ""));
' "$results1" "$results2"
rm -f "$results1" "$results2"
exit "$status"
