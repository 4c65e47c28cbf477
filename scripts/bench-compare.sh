#!/usr/bin/env bash
# Before/after benchmark of two commits in one run on one machine:
#   scripts/bench-compare.sh <before-rev> <after-rev> [memory|redis] [rounds]
# BENCH_BEFORE_ENV / BENCH_AFTER_ENV: extra KEY=VALUE settings (space-separated) for one side,
# e.g. the same rev twice with BENCH_AFTER_ENV="TRACING_ENABLED=true TRACING_SAMPLING_RATE=0.1".
# Each rev is built in a temporary git worktree (sharing this checkout's node_modules); the two
# servers are driven by ghz in alternating rounds, so machine noise falls on both alike.
set -euo pipefail
cd "$(dirname "$0")/.."
before=${1:?before rev}; after=${2:?after rev}; backend=${3:-memory}; rounds=${4:-3}
DURATION=${BENCH_DURATION:-8s}; CONCURRENCY=${BENCH_CONCURRENCY:-50}; CONNECTIONS=${BENCH_CONNECTIONS:-4}
GHZ=$(command -v ghz || echo "$(go env GOPATH)/bin/ghz")
[ -x "$GHZ" ] || go install github.com/bojand/ghz/cmd/ghz@v0.93.0

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  git worktree remove --force "$work/before" 2>/dev/null || true
  git worktree remove --force "$work/after" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
free_port() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }

for side in before after; do
  rev=${!side}
  git worktree add --quiet --detach "$work/$side" "$rev"
  ln -s "$PWD/node_modules" "$work/$side/node_modules"
  (cd "$work/$side" && npx tsc -p tsconfig.build.json)
done

env_extra=()
if [ "$backend" = redis ]; then
  redis_port=$(free_port)
  redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --logfile /dev/null &
  pids+=($!)
  for _ in $(seq 50); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  env_extra=(REDIS_URL="127.0.0.1:$redis_port")
fi

declare -A port pid
# CPU seconds (user + system) the server process has used so far.
cpu_of() { awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$1/stat"; }
# CPU seconds the Redis server has used (both sides share it; rounds do not overlap).
redis_cpu() { redis-cli -p "$redis_port" info cpu | awk -F: '/^used_cpu_(sys|user):/ {s += $2} END {print s}'; }
for side in before after; do
  port[$side]=$(free_port)
  side_env_var="BENCH_${side^^}_ENV"
  read -r -a side_env <<< "${!side_env_var:-}"
  env "${env_extra[@]}" "${side_env[@]}" RUNTIME_ROOT="$PWD/bench/rules" RUNTIME_WATCH_ROOT=false LOG_LEVEL=ERROR \
    GRPC_HOST=127.0.0.1 GRPC_PORT="${port[$side]}" HOST=127.0.0.1 PORT=0 DEBUG_PORT=0 USE_PROMETHEUS=false \
    node "$work/$side/dist/src/main.js" 2>/dev/null &
  pids+=($!)
  pid[$side]=$!
done
sleep 2

run() {
  "$GHZ" --insecure --proto proto/envoy/service/ratelimit/v3/rls.proto --import-paths proto \
    --call envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit \
    -d '{"domain":"bench","descriptors":[{"entries":[{"key":"tenant","value":"t{{.RequestNumber}}"},{"key":"path","value":"/a"}]}]}' \
    -c "$CONCURRENCY" --connections "$CONNECTIONS" -z "$1" "127.0.0.1:$2"
}
for side in before after; do run 2s "${port[$side]}" > /dev/null; done
echo "# $(date -u +%FT%TZ) $backend: before=$(git rev-parse --short "$before") ${BENCH_BEFORE_ENV:-} after=$(git rev-parse --short "$after") ${BENCH_AFTER_ENV:-}, $(nproc) cores, ghz -c $CONCURRENCY --connections $CONNECTIONS -z $DURATION, $rounds alternating rounds"
for r in $(seq "$rounds"); do
  for side in before after; do
    cpu0=$(cpu_of "${pid[$side]}")
    [ "$backend" = redis ] && rcpu0=$(redis_cpu)
    out=$(run "$DURATION" "${port[$side]}")
    cpu1=$(cpu_of "${pid[$side]}")
    [ "$backend" = redis ] && rcpu1=$(redis_cpu)
    count=$(echo "$out" | awk '/Count:/ {print $2}')
    rps=$(echo "$out" | awk '/Requests\/sec:/ {print $2}')
    p50=$(echo "$out" | awk '/50 % in/ {print $4}')
    p99=$(echo "$out" | awk '/99 % in/ {print $4}')
    # Server CPU per call: steadier than req/s on a small machine where ghz competes for cores.
    us=$(awk -v a="$cpu0" -v b="$cpu1" -v n="$count" 'BEGIN {printf "%.0f", (b - a) * 1e6 / n}')
    extra=""
    if [ "$backend" = redis ]; then
      extra=", redis CPU $(awk -v a="$rcpu0" -v b="$rcpu1" -v n="$count" 'BEGIN {printf "%.0f", (b - a) * 1e6 / n}') us/call"
    fi
    echo "round $r $side: $rps req/s, p50 ${p50} ms, p99 ${p99} ms, server CPU ${us} us/call$extra"
  done
done
