#!/usr/bin/env bash
# The whole test suite: typecheck and lint first, then unit, integration (real redis-server
# processes) and end-to-end (real gRPC against the real server). Used by `npm test` and by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."

# Real redis-server/redis-cli for the integration suites; openssl makes the TLS certificates of
# the TLS tests; pgrep (procps) looks at worker processes; chromium loads the debug page.
missing=()
for tool in redis-server redis-cli openssl pgrep chromium; do command -v "$tool" >/dev/null 2>&1 || missing+=("$tool"); done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "missing ${missing[*]}; installing with apt-get" >&2
    apt-get update -qq && apt-get install -y redis-server openssl procps chromium >&2
  else
    echo "The tests need ${missing[*]}. Install them with:" >&2
    echo "  sudo apt-get update -qq && sudo apt-get install -y redis-server openssl procps chromium" >&2
    exit 1
  fi
fi

# The statsd tests run the real prometheus/statsd_exporter: installed with go install when missing,
# into $(go env GOPATH)/bin, where test/harness/statsd-exporter.ts looks for it. No Go, no tests.
STATSD_EXPORTER_VERSION=v0.28.0
if ! command -v go >/dev/null 2>&1; then
  echo "The statsd tests need Go to install statsd_exporter (https://go.dev/dl/), then:" >&2
  echo "  go install github.com/prometheus/statsd_exporter@$STATSD_EXPORTER_VERSION" >&2
  exit 1
fi
if [ ! -x "$(go env GOPATH)/bin/statsd_exporter" ]; then
  echo "installing statsd_exporter $STATSD_EXPORTER_VERSION with go install" >&2
  go install "github.com/prometheus/statsd_exporter@$STATSD_EXPORTER_VERSION"
fi

# The tests that run beside the reference (envoyproxy/ratelimit) build it from its source once per
# machine, with go install from the Go module proxy at the commit test/harness/reference-server.ts
# pins, into the cache that harness reads (here, before vitest runs files in parallel).
REFERENCE_VERSION=$(sed -n "s/^export const REFERENCE_VERSION = '\(.*\)';$/\1/p" test/harness/reference-server.ts)
reference_bin="${XDG_CACHE_HOME:-$HOME/.cache}/floodgate-test/service_cmd-$REFERENCE_VERSION"
if [ -z "${REFERENCE_RATELIMIT_BIN:-}" ] && [ ! -x "$reference_bin" ]; then
  echo "building the reference (envoyproxy/ratelimit $REFERENCE_VERSION) with go install" >&2
  gobin=$(mktemp -d)
  (cd "$gobin" && GOBIN="$gobin" GOFLAGS=-mod=mod go install "github.com/envoyproxy/ratelimit/src/service_cmd@$REFERENCE_VERSION")
  mkdir -p "$(dirname "$reference_bin")" && mv "$gobin/service_cmd" "$reference_bin" && rm -rf "$gobin"
fi

# The tests run on the Node.js line the image ships (.node-version), fetched once when older here.
source scripts/use-node-lts.sh

[ -d node_modules ] || npm ci
# The SIGTERM end-to-end tests run the built server as a real process.
npm run --silent build
npx tsc -p tsconfig.json --noEmit
# The linter before any test: a layer importing from above it, an import cycle, a floating
# promise, too many parameters or too complex a function fails here with the file and the rule.
npm run --silent lint
# One formatter (Prettier, .prettierrc.json), applied to the whole tree: a file it would rewrite fails here.
npm run --silent format:check

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
