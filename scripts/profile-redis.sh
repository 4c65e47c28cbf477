#!/bin/bash
# Where Redis spends its CPU under floodgate's load and under the reference's (issue 20).
#
#   scripts/profile-redis.sh floodgate|reference uniform|multi3 <out dir> [reference binary]
#
# Starts a standalone redis-server and the server (floodgate from dist/, after `npm run build`;
# or envoyproxy/ratelimit built from source) on loopback with bench/rules, drives it with ghz
# (-c 50 --connections 4, the bench's requests) for 14 s, and records redis-server with
# `perf record -F 4999 -g` for 8 s from the 4th second, so that the keys exist as in a steady
# load. Prints req/s, Redis CPU µs per request over the recording, and the share of samples in
# the kernel, libc, jemalloc, Redis' named functions and the redis binary's unnamed code (the
# statically linked Lua VM). Needs perf, redis-server and ghz; Linux only.
set -eu
WHO=$1 SCEN=$2 OUT=$3 REFERENCE=${4:-}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$OUT"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
RP=$(free_port) GP=$(free_port) HP=$(free_port) DP=$(free_port)
RD=$(mktemp -d)
PIDS=()
cleanup() { kill "${PIDS[@]}" 2>/dev/null || true; rm -rf "$RD"; }
trap cleanup EXIT
redis-server --port "$RP" --bind 127.0.0.1 --save '' --appendonly no --dir "$RD" >/dev/null 2>&1 &
RPID=$!
PIDS+=("$RPID")
for _ in $(seq 50); do redis-cli -p "$RP" ping >/dev/null 2>&1 && break; sleep 0.1; done
if [ "$WHO" = floodgate ]; then
  (cd "$ROOT" && REDIS_URL=127.0.0.1:$RP RUNTIME_ROOT=$ROOT/bench/rules RUNTIME_WATCH_ROOT=false LOG_LEVEL=ERROR \
    GRPC_HOST=127.0.0.1 GRPC_PORT=$GP HOST=127.0.0.1 PORT=0 DEBUG_PORT=0 USE_PROMETHEUS=false \
    LOCAL_CACHE_SIZE_IN_BYTES=1048576 exec node --max-semi-space-size=16 dist/src/main.js) >/dev/null 2>&1 &
else
  env -i PATH="$PATH" HOME="$HOME" USE_STATSD=false LOG_LEVEL=error REDIS_SOCKET_TYPE=tcp REDIS_URL=127.0.0.1:$RP \
    RUNTIME_ROOT="$ROOT/bench" RUNTIME_SUBDIRECTORY=rules RUNTIME_WATCH_ROOT=false GRPC_HOST=127.0.0.1 GRPC_PORT=$GP \
    HOST=127.0.0.1 PORT=$HP DEBUG_HOST=127.0.0.1 DEBUG_PORT=$DP LOCAL_CACHE_SIZE_IN_BYTES=1048576 "$REFERENCE" >/dev/null 2>&1 &
fi
PIDS+=($!)
sleep 2
KEY='{{randomInt 0 10000}}'
TENANT='{"entries":[{"key":"tenant","value":"t'$KEY'"},{"key":"path","value":"/a"}]}'
if [ "$SCEN" = uniform ]; then
  DATA='{"domain":"bench","descriptors":['$TENANT']}'
else
  DATA='{"domain":"bench","descriptors":['$TENANT',{"entries":[{"key":"client","value":"c'$KEY'"}]},{"entries":[{"key":"user","value":"u'$KEY'"}]}]}'
fi
(cd "$ROOT" && ghz --insecure --proto proto/envoy/service/ratelimit/v3/rls.proto --import-paths proto \
  --call envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit -d "$DATA" -c 50 --connections 4 -z 14s \
  127.0.0.1:"$GP") >"$OUT/ghz.txt" 2>&1 &
GZ=$!
sleep 4
TICKS0=$(awk '{print $14+$15}' "/proc/$RPID/stat")
perf record -F 4999 -g -p "$RPID" -o "$OUT/perf.data" -- sleep 8 >/dev/null 2>&1
TICKS1=$(awk '{print $14+$15}' "/proc/$RPID/stat")
wait $GZ
RPS=$(awk '/Requests\/sec/ {print $2}' "$OUT/ghz.txt")
python3 - "$RPS" "$((TICKS1 - TICKS0))" "$(getconf CLK_TCK)" <<'PY'
import sys
rps, ticks, hz = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
print(f"{rps:.0f} req/s; Redis CPU {ticks / hz * 1e6 / (8 * rps):.1f} us per request over the 8 s recorded")
PY
perf report -i "$OUT/perf.data" --no-children --sort dso,symbol --stdio -g none 2>/dev/null | python3 -c '
import sys, re, collections
share, named = collections.Counter(), collections.Counter()
for line in sys.stdin:
    m = re.match(r"\s+([0-9.]+)%\s+(\S+)\s+\[.\]\s+(\S+)", line)
    if not m: continue
    pct, dso, sym = float(m.group(1)), m.group(2), m.group(3)
    if dso.startswith("[kernel"): k = "kernel"
    elif "libc" in dso: k = "libc"
    elif "jemalloc" in dso: k = "jemalloc"
    elif sym.startswith("0x"): k = "redis binary, unnamed (the Lua VM)"
    elif dso.startswith("redis"): k = "redis, named functions"
    else: k = "other (" + dso + ")"
    share[k] += pct
    if k == "redis, named functions": named[sym] += pct
for k, v in share.most_common(): print(f"{v:5.1f}%  {k}")
print("top named:", ", ".join(f"{s} {v:.1f}%" for s, v in named.most_common(6)))
'
