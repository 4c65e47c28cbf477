#!/usr/bin/env bash
# The cost of a policy: one build, two servers (rules without a policy: bench/rules; the same
# rules with a policy: bench/rules-policy), driven by ghz in alternating rounds.
#   scripts/bench-policy.sh [memory|redis] [rounds]
set -euo pipefail
cd "$(dirname "$0")/.."
backend=${1:-redis}; rounds=${2:-3}
DURATION=${BENCH_DURATION:-8s}; CONCURRENCY=${BENCH_CONCURRENCY:-50}; CONNECTIONS=${BENCH_CONNECTIONS:-4}
GHZ=$(command -v ghz || echo "$(go env GOPATH)/bin/ghz")
[ -x "$GHZ" ] || go install github.com/bojand/ghz/cmd/ghz@v0.93.0
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
free_port() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
npm run --silent build

env_extra=()
if [ "$backend" = redis ]; then
  redis_port=$(free_port)
  redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --logfile /dev/null &
  pids+=($!)
  for _ in $(seq 50); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  env_extra=(REDIS_URL="127.0.0.1:$redis_port")
fi

declare -A port pid rules=([without]=bench/rules [with]=bench/rules-policy)
cpu_of() { awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$1/stat"; }
redis_cpu() { redis-cli -p "$redis_port" info cpu | awk -F: '/^used_cpu_(sys|user):/ {s += $2} END {print s}'; }
for side in without with; do
  port[$side]=$(free_port)
  env "${env_extra[@]}" RUNTIME_ROOT="$PWD/${rules[$side]}" RUNTIME_WATCH_ROOT=false LOG_LEVEL=ERROR \
    GRPC_HOST=127.0.0.1 GRPC_PORT="${port[$side]}" HOST=127.0.0.1 PORT=0 DEBUG_PORT=0 USE_PROMETHEUS=false \
    node dist/src/main.js 2>/dev/null &
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
for side in without with; do run 2s "${port[$side]}" > /dev/null; done
echo "# $(date -u +%FT%TZ) $backend: $(git rev-parse --short HEAD), $(nproc) cores, ghz -c $CONCURRENCY --connections $CONNECTIONS -z $DURATION, $rounds alternating rounds"
for r in $(seq "$rounds"); do
  for side in without with; do
    cpu0=$(cpu_of "${pid[$side]}")
    [ "$backend" = redis ] && rcpu0=$(redis_cpu)
    out=$(run "$DURATION" "${port[$side]}")
    cpu1=$(cpu_of "${pid[$side]}")
    [ "$backend" = redis ] && rcpu1=$(redis_cpu)
    count=$(echo "$out" | awk '/Count:/ {print $2}')
    rps=$(echo "$out" | awk '/Requests\/sec:/ {print $2}')
    p50=$(echo "$out" | awk '/50 % in/ {print $4}')
    p99=$(echo "$out" | awk '/99 % in/ {print $4}')
    oks=$(echo "$out" | awk '/\[OK\]/ {print $2}')
    us=$(awk -v a="$cpu0" -v b="$cpu1" -v n="$count" 'BEGIN {printf "%.0f", (b - a) * 1e6 / n}')
    extra=""
    if [ "$backend" = redis ]; then
      extra=", redis CPU $(awk -v a="$rcpu0" -v b="$rcpu1" -v n="$count" 'BEGIN {printf "%.0f", (b - a) * 1e6 / n}') us/call"
    fi
    echo "round $r $side policy: $rps req/s, p50 ${p50} ms, p99 ${p99} ms, ${oks} OK of ${count}, server CPU ${us} us/call$extra"
  done
done
