#!/usr/bin/env bash
# Responsiveness benchmark for the redis_infer module: PING latency (p50/p99/max, redis-benchmark) on
# an idle server and while N generations run, then the module's own longest main-thread stall per
# INFER command and callback (measured inside the module, INFER.STATS main_thread_us).
# Usage: scripts/redis_bench.sh            env: BUILD_DIR (default build/release), GENERATIONS (8),
#        MAXTOKENS (1500), PINGS (20000), THREADS (0 = all cores)
set -euo pipefail
cd "$(dirname "$0")/.."
export INFER_MODELS_DIR=${INFER_MODELS_DIR:-$(realpath -m ../shared/models)}
BUILD_DIR=${BUILD_DIR:-build/release}
GENERATIONS=${GENERATIONS:-8}
MAXTOKENS=${MAXTOKENS:-1500}
PINGS=${PINGS:-20000}
THREADS=${THREADS:-0}
module=$(realpath "$BUILD_DIR/src/redis/redis_infer.so")
model="$INFER_MODELS_DIR/stories260K.gguf"
[ -f "$module" ] || { echo "bench: $module not built (scripts/setup.sh release)" >&2; exit 1; }

port=""
for _ in $(seq 50); do
  p=$((20000 + RANDOM % 30000))
  if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then port=$p; break; fi
done
[ -n "$port" ] || { echo "bench: no free port" >&2; exit 1; }

work=$(mktemp -d)
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" --daemonize no \
  --logfile "$work/redis.log" --loadmodule "$module" MODEL stories "$model" \
  MAX-RUNNING "$GENERATIONS" QUEUE 64 THREADS "$THREADS" &
pid=$!
loaders=()
cleanup() {
  touch "$work/stop"
  for l in "${loaders[@]}"; do kill "$l" 2>/dev/null || true; done
  redis-cli -p "$port" SHUTDOWN NOSAVE >/dev/null 2>&1 || kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
cli() { redis-cli -p "$port" "$@"; }
for _ in $(seq 100); do [ "$(cli PING 2>/dev/null)" = "PONG" ] && break; sleep 0.1; done
[ "$(cli PING 2>/dev/null)" = "PONG" ] || { cat "$work/redis.log" >&2; exit 1; }

ping_latency() {  # prints "p50 p99 max" in ms for PINGS sequential PINGs
  redis-benchmark -p "$port" -t ping_inline -n "$PINGS" -c 1 --csv --precision 3 |
    awk -F'","' 'NR==2 { gsub(/"/, "", $8); print $5, $7, $8 }'
}

echo "cpu: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); redis $(redis-server --version | grep -o 'v=[^ ]*')"
read -r p50 p99 max < <(ping_latency)
echo "idle:    PING p50 ${p50} ms  p99 ${p99} ms  max ${max} ms  ($PINGS pings)"

# N clients generating back to back (one of them streaming into a Redis Stream).
for i in $(seq "$GENERATIONS"); do
  extra=()
  [ "$i" = 1 ] && extra=(STREAM "bench:stream")
  (while [ ! -e "$work/stop" ]; do
     cli INFER.GENERATE stories "Once upon a time" MAXTOKENS "$MAXTOKENS" TEMP 0.8 "${extra[@]}" >/dev/null
   done) &
  loaders+=($!)
done
sleep 1
running=$(cli INFO infer | awk -F: '/^infer_running:/ { print $2 }' | tr -d '\r')
read -r p50 p99 max < <(ping_latency)
echo "loaded:  PING p50 ${p50} ms  p99 ${p99} ms  max ${max} ms  (${running} sequences running)"
touch "$work/stop"
wait "${loaders[@]}" 2>/dev/null || true
loaders=()

echo "module: $(cli INFO infer | grep -E '^infer_(completed|tokens_generated|stream_entries):' | tr -d '\r' | tr '\n' ' ')"
echo "longest main-thread stall per command/callback (INFER.STATS main_thread_us; wall includes time"
echo "the main thread was preempted by other processes, cpu is the module's own work):"
cli --no-raw INFER.STATS >/dev/null  # warm
cli INFER.STATS | awk '
  /^main_thread_us$/ { on = 1; next }
  on && /^(calls|max_us|max_cpu_us|avg_us)$/ { key = $0; next }
  on && key == "calls" { calls = $0; key = ""; next }
  on && key == "max_us" { maxus = $0; key = ""; next }
  on && key == "max_cpu_us" { maxcpu = $0; key = ""; next }
  on && key == "avg_us" {
    printf "  %-30s calls %6d  max %6d us wall, %5d us cpu  avg %5d us\n", name, calls, maxus, maxcpu, $0
    key = ""; next }
  on { name = $0 }'
