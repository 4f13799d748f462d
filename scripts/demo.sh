#!/usr/bin/env bash
# The main job: build, start redis-server with the redis_infer module and the stories260K model on a
# free loopback port, answer INFER.GENERATE through redis-cli, then stop Redis.
# Usage: scripts/demo.sh ["prompt"]          (BUILD_DIR=... to use an existing build, skipping setup)
set -euo pipefail
cd "$(dirname "$0")/.."
export INFER_MODELS_DIR=${INFER_MODELS_DIR:-$(realpath -m ../shared/models)}
prompt=${1:-Once upon a time}

if [ -z "${BUILD_DIR:-}" ]; then
  scripts/setup.sh release
  BUILD_DIR=build/release
fi
module=$(realpath "$BUILD_DIR/src/redis/redis_infer.so")
model="$INFER_MODELS_DIR/stories260K.gguf"
[ -f "$module" ] || { echo "demo: $module not built" >&2; exit 1; }
[ -f "$model" ] || { echo "demo: $model missing" >&2; exit 1; }

# A free loopback port: nothing answers a TCP connect on it.
port=""
for _ in $(seq 50); do
  p=$((20000 + RANDOM % 30000))
  if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then port=$p; break; fi
done
[ -n "$port" ] || { echo "demo: no free port" >&2; exit 1; }

work=$(mktemp -d)
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" --daemonize no \
  --logfile "$work/redis.log" \
  --loadmodule "$module" MODEL stories "$model" MODEL-DIR "$INFER_MODELS_DIR" QUEUE 16 &
pid=$!
cleanup() {
  redis-cli -p "$port" SHUTDOWN NOSAVE >/dev/null 2>&1 || kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

cli() { redis-cli -p "$port" "$@"; }
for _ in $(seq 100); do
  [ "$(cli PING 2>/dev/null)" = "PONG" ] && break
  kill -0 "$pid" 2>/dev/null || { cat "$work/redis.log" >&2; exit 1; }
  sleep 0.1
done
[ "$(cli PING 2>/dev/null)" = "PONG" ] || { echo "demo: redis-server did not start" >&2; cat "$work/redis.log" >&2; exit 1; }

echo "== redis-server $(redis-server --version | grep -o 'v=[^ ]*') on 127.0.0.1:$port with $(basename "$module")"
echo "== INFER.MODELS"; cli INFER.MODELS
echo "== INFER.GENERATE stories \"$prompt\" MAXTOKENS 60 TEMP 0"
answer=$(cli INFER.GENERATE stories "$prompt" MAXTOKENS 60 TEMP 0)
echo "$prompt$answer"
echo
echo "== token keys: INFER.TOKENIZE ... STORE doc:1, then INFER.GENERATE stories TOKENS doc:1 ... WITHSTATS"
cli INFER.TOKENIZE stories "$prompt" STORE doc:1
cli INFER.GENERATE stories TOKENS doc:1 MAXTOKENS 40 TEMP 0.8 SEED 7 WITHSTATS | head -20
echo "== streaming into a Redis Stream: INFER.GENERATE ... STREAM out:1, then XRANGE out:1 - +"
cli INFER.GENERATE stories "$prompt" MAXTOKENS 20 TEMP 0 STREAM out:1 >/dev/null
cli XRANGE out:1 - + | tail -8
echo "== INFO infer"
cli INFO infer | grep -E 'infer_(completed|tokens_generated|tokens_per_second|max_main_thread_stall_us)'
