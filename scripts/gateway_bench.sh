#!/usr/bin/env bash
# The gateway's added latency per request and 64 concurrent streaming clients through one gateway
# (scripts/gateway_bench.py says what it measures), on redis-server with the module and stories260K.
# Usage: scripts/gateway_bench.sh [requests=500] [clients=64] [tokens=64]   (BUILD_DIR=build/release)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/shared_dirs.sh
build=${BUILD_DIR:-build/release}
n=${1:-500}; clients=${2:-64}; tokens=${3:-64}
free_port() {
  for _ in $(seq 50); do
    local p=$((20000 + RANDOM % 30000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return; fi
  done
  return 1
}
rport=$(free_port); gport=$(free_port)
work=$(mktemp -d)
redis-server --port "$rport" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" --logfile "$work/redis.log" \
  --loadmodule "$(realpath "$build/src/redis/redis_infer.so")" MODEL stories "$INFER_MODELS_DIR/stories260K.gguf" \
  QUEUE 32 MAX-RUNNING 16 &
rpid=$!
"$build/src/cli/infer" gateway --redis "127.0.0.1:$rport" --listen "127.0.0.1:$gport" --no-access-log &
gpid=$!
trap 'kill $gpid 2>/dev/null; redis-cli -p $rport SHUTDOWN NOSAVE >/dev/null 2>&1 || kill $rpid; wait; rm -rf "$work"' EXIT
for _ in $(seq 100); do
  [ "$(redis-cli -p "$rport" PING 2>/dev/null)" = PONG ] && (exec 3<>"/dev/tcp/127.0.0.1/$gport") 2>/dev/null && break
  sleep 0.1
done
echo "gateway_bench: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores"
/usr/bin/python3 scripts/gateway_bench.py "$rport" "$gport" stories "$n" "$clients" "$tokens"
