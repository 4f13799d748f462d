#!/usr/bin/env bash
# Vector sets through a real redis-server: VADD/s (pipelined INFER.VADD FP32 of N random DIM-d
# vectors, Q8, links M and build EF from the environment), then for each search EF the recall@10 of
# INFER.VSIM against INFER.VSIM ... TRUTH and VSIM/s (one client, one query at a time, round trips
# included) over Q random queries. Sets this large search on the module's search threads.
#   [M=16] [BUILD_EF=200] scripts/vector_bench.sh [build-dir] [N=100000] [DIM=256] [Q=200] [EFS="100 200 400 800 1600"]
set -euo pipefail
BUILD=${1:-build}
N=${2:-100000}
DIM=${3:-256}
Q=${4:-200}
EFS=${5:-"100 200 400 800 1600"}
M=${M:-16}
BUILD_EF=${BUILD_EF:-200}
MODULE=$(realpath "$BUILD/src/redis/redis_infer.so")
PORT=${PORT:-$((20000 + RANDOM % 20000))}
DIR=$(mktemp -d)
trap 'redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$DIR"' EXIT

redis-server --port "$PORT" --bind 127.0.0.1 --save '' --dir "$DIR" --daemonize yes \
  --logfile "$DIR/redis.log" --loadmodule "$MODULE" >/dev/null
for _ in $(seq 100); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done

PYTHONPATH="$(dirname "$0")" /usr/bin/python3 - "$PORT" "$N" "$DIM" "$Q" "$EFS" "$M" "$BUILD_EF" <<'PY'
import random, socket, struct, sys, time

port, n, dim, nq = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
efs = [int(x) for x in sys.argv[5].split()]
m, build_ef = int(sys.argv[6]), int(sys.argv[7])
sock = socket.create_connection(("127.0.0.1", port))
sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
rf = sock.makefile("rb")

from resp_client import encode as enc, read_reply


def read():
    return read_reply(rf)

def cpu_seconds():
    # redis-server's user + system CPU time (main thread and search threads): rates per CPU-second stay
    # comparable on a machine shared with other work, where wall-clock rates do not.
    sock.sendall(enc("INFO", "cpu"))
    info = dict(l.split(":", 1) for l in read().decode().split("\r\n") if ":" in l)
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])

rng = random.Random(42)
def vec():
    return struct.pack("<%df" % dim, *[rng.gauss(0, 1) for _ in range(dim)])

data = [enc("INFER.VADD", "bench", "FP32", vec(), "e%d" % i, "M", m, "EF", build_ef) for i in range(n)]
queries = [vec() for _ in range(nq)]
t0, c0 = time.time(), cpu_seconds()
batch = 1000
for s in range(0, n, batch):
    sock.sendall(b"".join(data[s:s + batch]))
    for _ in range(min(batch, n - s)): read()
add_s, add_cpu = time.time() - t0, cpu_seconds() - c0
print("vectors %d dim %d: VADD %.0f/s, %.0f per CPU-second (%.1f s, pipelined, Q8, M %d, build EF %d)"
      % (n, dim, n / add_s, n / add_cpu, add_s, m, build_ef))

truth = []
t0, c0 = time.time(), cpu_seconds()
for q in queries:
    sock.sendall(enc("INFER.VSIM", "bench", "FP32", q, "COUNT", 10, "TRUTH"))
    truth.append(set(read()))
print("TRUTH (linear scan): %.0f VSIM/s, %.0f per CPU-second" % (nq / (time.time() - t0), nq / (cpu_seconds() - c0)))
for ef in efs:
    found = 0
    t0, c0 = time.time(), cpu_seconds()
    for q, tr in zip(queries, truth):
        sock.sendall(enc("INFER.VSIM", "bench", "FP32", q, "COUNT", 10, "EF", ef))
        found += len(set(read()) & tr)
    dt, dc = time.time() - t0, cpu_seconds() - c0
    print("EF %5d: recall@10 %.3f, %.0f VSIM/s, %.0f per CPU-second" % (ef, found / (10.0 * nq), nq / dt, nq / dc))
sock.sendall(enc("MEMORY", "USAGE", "bench"))
print("MEMORY USAGE bench: %.1f MiB" % (int(read()) / 2**20))
PY
