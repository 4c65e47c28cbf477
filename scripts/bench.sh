#!/usr/bin/env bash
# ghz load test against the real server, on loopback only, bounded in time.
#   scripts/bench.sh [memory|redis ...]      (default: memory redis)
# Settings: BENCH_DURATION (10s), BENCH_CONCURRENCY (50), BENCH_CONNECTIONS (4), BENCH_WARMUP (2s),
# BENCH_ENV (extra server settings, e.g. "WORKERS=2").
# Prints one summary line per backend and appends the full ghz summaries to bench/last-run.txt.
set -euo pipefail
cd "$(dirname "$0")/.."

GHZ_VERSION=v0.93.0
GHZ=$(command -v ghz || true)
[ -n "$GHZ" ] || GHZ="$(go env GOPATH 2>/dev/null)/bin/ghz"
if [ ! -x "$GHZ" ]; then
  echo "installing ghz $GHZ_VERSION with go install" >&2
  go install "github.com/bojand/ghz/cmd/ghz@$GHZ_VERSION"
  GHZ="$(go env GOPATH)/bin/ghz"
fi

DURATION=${BENCH_DURATION:-10s}
CONCURRENCY=${BENCH_CONCURRENCY:-50}
CONNECTIONS=${BENCH_CONNECTIONS:-4}
WARMUP=${BENCH_WARMUP:-2s}
BACKENDS=("$@")
[ ${#BACKENDS[@]} -gt 0 ] || BACKENDS=(memory redis)

free_port() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }

npm run --silent build
out=bench/last-run.txt
{
  echo "# $(date -u +%FT%TZ) $(git rev-parse --short HEAD 2>/dev/null || echo nogit)"
  echo "# machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), node $(node --version), $(redis-server --version | cut -d' ' -f3)"
  echo "# ghz: -c $CONCURRENCY --connections $CONNECTIONS -z $DURATION (after a $WARMUP warm-up), one descriptor per call; server env: ${BENCH_ENV:-default}"
} > "$out"

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

for backend in "${BACKENDS[@]}"; do
  grpc_port=$(free_port)
  env_extra=()
  if [ "$backend" = redis ]; then
    redis_port=$(free_port)
    redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no --logfile /dev/null &
    pids+=($!)
    for _ in $(seq 50); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.1; done
    env_extra=(REDIS_URL="127.0.0.1:$redis_port")
  fi
  # shellcheck disable=SC2086
  env "${env_extra[@]}" ${BENCH_ENV:-} RUNTIME_ROOT="$PWD/bench/rules" RUNTIME_WATCH_ROOT=false LOG_LEVEL=ERROR \
    GRPC_HOST=127.0.0.1 GRPC_PORT="$grpc_port" HOST=127.0.0.1 PORT=0 DEBUG_PORT=0 USE_PROMETHEUS=false \
    node dist/src/main.js 2>/dev/null &
  server=$!
  pids+=($server)
  for _ in $(seq 100); do (echo > "/dev/tcp/127.0.0.1/$grpc_port") 2>/dev/null && break; sleep 0.1; done

  common=(--insecure --proto proto/envoy/service/ratelimit/v3/rls.proto --import-paths proto
    --call envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit
    -d '{"domain":"bench","descriptors":[{"entries":[{"key":"tenant","value":"t{{.RequestNumber}}"},{"key":"path","value":"/a"}]}]}'
    -c "$CONCURRENCY" --connections "$CONNECTIONS")
  "$GHZ" "${common[@]}" -z "$WARMUP" "127.0.0.1:$grpc_port" > /dev/null
  summary=$("$GHZ" "${common[@]}" -z "$DURATION" "127.0.0.1:$grpc_port")
  {
    echo "## backend: $backend"
    echo "$summary"
  } >> "$out"
  rps=$(echo "$summary" | awk '/Requests\/sec:/ {print $2}')
  p50=$(echo "$summary" | awk '/50 % in/ {print $4, $5}')
  p99=$(echo "$summary" | awk '/99 % in/ {print $4, $5}')
  # ghz -z cuts the calls in flight when time is up ("transport is closing"): not server errors.
  errors=$(echo "$summary" | awk '/Error distribution:/ {f=1; next} f && NF {print} !NF {f=0}' | grep -v 'transport is closing\|client connection is closing' || true)
  echo "$backend${BENCH_ENV:+ ($BENCH_ENV)}: ${rps} req/s, p50 ${p50}, p99 ${p99}${errors:+, errors: $errors}"
  kill "$server"; wait "$server" 2>/dev/null || true
done
kill "${pids[@]}" 2>/dev/null || true
