#!/bin/bash
# Young garbage per call (issue 29): a bare grpc-js server, floodgate on the memory backend and
# floodgate on Redis, each with --trace-gc and the shipped semi-space (16 MB), a 4,000-call warm-up
# then 20,000 uniform calls at 2,000/s (ghz -c 50 --connections 4). Prints the scavenges, the calls
# per scavenge, and per scavenge the median MB freed, MB promoted (heap growth after it) and pause.
# After `npm run build`. The trace logs stay in the printed directory.
#   bash scripts/bench-gc-trace.sh
set -u
cd "$(dirname "$0")/.."
source scripts/use-node-lts.sh >/dev/null
GHZ=${GHZ:-$(command -v ghz || echo "$(go env GOPATH)/bin/ghz")}
TMP=$(mktemp -d)
REQ='{"domain":"bench","descriptors":[{"entries":[{"key":"tenant","value":"t{{randomInt 0 10000}}"},{"key":"path","value":"/a"}]}]}'
run() { # name port
  $GHZ --insecure --proto proto/envoy/service/ratelimit/v3/rls.proto --import-paths proto --call envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit -d "$REQ" -c 50 --connections 4 -n $3 -r 2000 -O json 127.0.0.1:$2 > /dev/null
}
measure() { # name cmd...
  name=$1; shift
  port=$(( 40000 + RANDOM % 2000 ))
  log=$TMP/gc-$name.log
  env GRPC_PORT=$port GRPC_HOST=127.0.0.1 PORT=0 DEBUG_PORT=0 USE_PROMETHEUS=false USE_STATSD=false LOG_LEVEL=ERROR RUNTIME_ROOT=$PWD/bench/rules RUNTIME_WATCH_ROOT=false LOCAL_CACHE_SIZE_IN_BYTES=1048576 "$@" > $log 2>&1 &
  pid=$!
  for i in $(seq 1 100); do (echo > /dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
  run $name $port 4000   # warm-up
  a=$(grep -c Scavenge $log)
  run $name $port 20000
  b=$(grep -c Scavenge $log)
  kill $pid; wait $pid 2>/dev/null
  echo "$name: $((b - a)) scavenges for 20000 calls -> $(( 20000 / (b - a) )) calls per scavenge"
  grep Scavenge $log | tail -n $((b - a)) | python3 -c '
import re, sys
freed, promoted, pause, prev_after = [], [], [], None
for line in sys.stdin:
    m = re.search(r"Scavenge(?: \(interleaved\))? ([\d.]+) \([\d.]+\) -> ([\d.]+) \([\d.]+\) MB, (?:pooled: [\d.]+ MB, )?([\d.]+) / [\d.]+ ms", line)
    if not m: continue
    before, after = float(m.group(1)), float(m.group(2))
    freed.append(before - after); pause.append(float(m.group(3)))
    if prev_after is not None and after >= prev_after: promoted.append(after - prev_after)
    prev_after = after
med = lambda xs: sorted(xs)[len(xs) // 2] if xs else float("nan")
print(f"  per scavenge: freed {med(freed):.1f} MB, promoted {med(promoted):.1f} MB, pause {med(pause):.1f} ms (max {max(pause):.1f})")
'
}
RPORT=$(( 46000 + RANDOM % 1000 ))
redis-server --port $RPORT --bind 127.0.0.1 --save '' --appendonly no --daemonize no > /dev/null &
rpid=$!
sleep 0.5
NODE="node --max-semi-space-size=16 --trace-gc"
measure bare-grpc-js $NODE scripts/bench-bare-server.js
measure floodgate-memory env BACKEND_TYPE=memory $NODE dist/src/main.js
measure floodgate-redis env REDIS_URL=127.0.0.1:$RPORT $NODE dist/src/main.js
kill $rpid
echo "trace logs: $TMP"
