#!/bin/bash
# Where a call's allocations come from (issue 29): floodgate on Redis under 20,000 uniform calls at
# 2,000/s (ghz -c 50 --connections 4), V8's sampling heap profiler counting collected objects too
# (scripts/heap-profile-preload.cjs), then KB allocated per call by package or floodgate folder
# and by function. After `npm run build`. Extra settings for the server as arguments:
#   bash scripts/bench-heap-profile.sh                          # grpc-js serves ShouldRateLimit
#   bash scripts/bench-heap-profile.sh GRPC_RLS_HANDLER=http2   # node:http2 straight
set -u
cd "$(dirname "$0")/.."
source scripts/use-node-lts.sh >/dev/null
GHZ=${GHZ:-$(command -v ghz || echo "$(go env GOPATH)/bin/ghz")}
TMP=$(mktemp -d)
CALLS=20000
RPORT=$((47000 + RANDOM % 500))
PORT=$((42000 + RANDOM % 500))
redis-server --port $RPORT --bind 127.0.0.1 --save '' --appendonly no >/dev/null &
rpid=$!
sleep 0.5
PROF_OUT=$TMP/profile.json env GRPC_PORT=$PORT GRPC_HOST=127.0.0.1 PORT=0 DEBUG_PORT=0 USE_PROMETHEUS=false USE_STATSD=false \
  LOG_LEVEL=ERROR RUNTIME_ROOT=$PWD/bench/rules RUNTIME_WATCH_ROOT=false LOCAL_CACHE_SIZE_IN_BYTES=1048576 \
  REDIS_URL=127.0.0.1:$RPORT "$@" node --max-semi-space-size=16 --require ./scripts/heap-profile-preload.cjs dist/src/main.js 2>"$TMP/server.err" &
pid=$!
for _ in $(seq 1 100); do (echo >/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.1; done
REQ='{"domain":"bench","descriptors":[{"entries":[{"key":"tenant","value":"t{{randomInt 0 10000}}"},{"key":"path","value":"/a"}]}]}'
"$GHZ" --insecure --proto proto/envoy/service/ratelimit/v3/rls.proto --import-paths proto \
  --call envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit -d "$REQ" -c 50 --connections 4 -n $CALLS -r 2000 -O json 127.0.0.1:$PORT >/dev/null
kill -USR2 $pid
for _ in $(seq 1 50); do [ -s "$TMP/profile.json" ] && break; sleep 0.2; done
kill $pid $rpid
wait 2>/dev/null
python3 - "$TMP/profile.json" $CALLS <<'PY'
import collections, json, re, sys
profile, calls = json.load(open(sys.argv[1])), int(sys.argv[2])
by_fn, by_mod = collections.Counter(), collections.Counter()
def module(url):
    m = re.search(r"node_modules/((?:@[^/]+/)?[^/]+)", url)
    if m: return m.group(1)
    if "dist/src/" in url: return "floodgate: src/" + url.split("dist/src/")[1].split("/")[0]
    if url.startswith("node:"): return "/".join(url.split("/")[:3])
    return url or "(V8 and native)"
stack = [profile["head"]]
while stack:
    n = stack.pop()
    cf, size = n["callFrame"], n.get("selfSize", 0)
    by_fn[f"{cf['functionName'] or '(anonymous)'} {cf['url'].split('/')[-1]}:{cf['lineNumber'] + 1}"] += size
    by_mod[module(cf["url"])] += size
    stack.extend(n.get("children", []))
kb = lambda v: v / calls / 1024
print(f"{kb(sum(by_fn.values())):.1f} KB allocated per call ({calls} calls, sampled every 4 KB)")
print("\nby package or floodgate folder:")
for k, v in by_mod.most_common(14): print(f"  {kb(v):5.2f} KB  {k}")
print("\nby function:")
for k, v in by_fn.most_common(25): print(f"  {kb(v):5.2f} KB  {k}")
PY
echo "profile: $TMP/profile.json"
