#!/usr/bin/env bash
# Vector sets through a real redis-server, with hnswlib beside them. The vectors come from bench_vector
# (INFER_BENCH_WRITE), so the in-process benchmark, this script and hnswlib see the same data:
#   DATASET=gaussian   (default) N random DIM-d Gaussian vectors (DIM 256), HNSW's worst case
#   DATASET=clustered  N vectors with the structure of real embeddings (bench/clustered_embeddings.h, DIM 384)
# Measures VADD/s (pipelined INFER.VADD FP32, links M and build EF from the environment, QUANT q8 / noquant /
# bin), then, over Q queries, the exact scan (INFER.VSIM ... TRUTH) and for each search EF the recall@10
# against TRUTH and against the exact float neighbours (numpy), and VSIM/s for each count of CLIENTS
# (bench/vsim_clients: one query at a time per client, round trips included; each client runs every query,
# from its own starting point), with the ratio to TRUTH's rate. ROUNDS > 1 measures the rates in that many
# alternating rounds (TRUTH, then each EF) and prints medians, the ratio being the median of each round's.
# With python3-hnswlib installed, the same vectors in hnswlib (cosine, float32, the same M and build EF,
# one thread): build time, and per EF recall@10 against the float neighbours and searches/s (one query at
# a time). Sets this large search on the module's search threads.
#   [DATASET=gaussian] [M=16] [BUILD_EF=200] [QUANT=q8] [CLIENTS="1 8"] [ROUNDS=1] [HNSWLIB=1]
#     scripts/vector_bench.sh [build-dir] [N=100000] [DIM] [Q] [EFS]
# (gaussian: DIM 256, Q 200, EFS "100 200 400 800 1600"; clustered: DIM 384, Q 500, EFS "10 20 30 40 60 80 160 320")
set -euo pipefail
BUILD=${1:-build}
DATASET=${DATASET:-gaussian}
case "$DATASET" in
  gaussian) def_dim=256 def_q=200 def_efs="100 200 400 800 1600" ;;
  clustered) def_dim=384 def_q=500 def_efs="10 20 30 40 60 80 160 320" ;;
  *) echo "DATASET must be gaussian or clustered" >&2; exit 2 ;;
esac
N=${2:-100000}
DIM=${3:-$def_dim}
Q=${4:-$def_q}
EFS=${5:-$def_efs}
M=${M:-16}
BUILD_EF=${BUILD_EF:-200}
QUANT=${QUANT:-q8}
CLIENTS=${CLIENTS:-"1 8"}
HNSWLIB=${HNSWLIB:-1}
ROUNDS=${ROUNDS:-1}
MODULE=$(realpath "$BUILD/src/redis/redis_infer.so")
PORT=${PORT:-$((20000 + RANDOM % 20000))}
DIR=$(mktemp -d)
trap 'redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$DIR"' EXIT

INFER_BENCH_DATASET=$DATASET INFER_BENCH_VECTORS=$N INFER_BENCH_DIM=$DIM INFER_BENCH_QUERIES=$Q \
  INFER_BENCH_WRITE="$DIR/set" "$BUILD/bench/bench_vector" >/dev/null 2>&1
redis-server --port "$PORT" --bind 127.0.0.1 --save '' --dir "$DIR" --daemonize yes \
  --logfile "$DIR/redis.log" --loadmodule "$MODULE" >/dev/null
for _ in $(seq 100); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done

PYTHONPATH="$(dirname "$0")" /usr/bin/python3 - "$PORT" "$N" "$DIM" "$Q" "$EFS" "$M" "$BUILD_EF" "$QUANT" "$CLIENTS" \
  "$HNSWLIB" "$DIR/set" "$ROUNDS" "$(realpath "$BUILD/bench/vsim_clients")" <<'PY'
import socket, statistics, subprocess, sys, time

from resp_client import encode as enc, read_reply

port, n, dim, nq = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
efs = [int(x) for x in sys.argv[5].split()]
m, build_ef, quant = int(sys.argv[6]), int(sys.argv[7]), sys.argv[8].upper()
clients = [int(x) for x in sys.argv[9].split()]
want_hnswlib, prefix, rounds, load_client = sys.argv[10] == "1", sys.argv[11], int(sys.argv[12]), sys.argv[13]
row = 4 * dim
with open(prefix + ".data", "rb") as f: data = f.read()
with open(prefix + ".queries", "rb") as f: query_bytes = f.read()
vectors = [data[i * row:(i + 1) * row] for i in range(n)]
queries = [query_bytes[i * row:(i + 1) * row] for i in range(nq)]

sock = socket.create_connection(("127.0.0.1", port))
sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
rf = sock.makefile("rb")
def call(*args):
    sock.sendall(enc(*args))
    return read_reply(rf)

def cpu_seconds():
    # redis-server's user + system CPU time (main thread and search threads): rates per CPU-second stay
    # comparable on a machine shared with other work, where wall-clock rates do not.
    info = dict(l.split(":", 1) for l in call("INFO", "cpu").decode().split("\r\n") if ":" in l)
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])

quant_word = {"Q8": "Q8", "NOQUANT": "NOQUANT", "F32": "NOQUANT", "BIN": "BIN"}[quant]
t0, c0 = time.time(), cpu_seconds()
batch = 1000
for s in range(0, n, batch):
    sock.sendall(b"".join(enc("INFER.VADD", "bench", "FP32", vectors[i], "e%d" % i, quant_word, "M", m, "EF", build_ef)
                          for i in range(s, min(n, s + batch))))
    for _ in range(min(batch, n - s)): read_reply(rf)
add_s, add_cpu = time.time() - t0, cpu_seconds() - c0
print("vectors %d dim %d: VADD %.0f/s, %.0f per CPU-second (build %.1f s, pipelined, %s, M %d, build EF %d)"
      % (n, dim, n / add_s, n / add_cpu, add_s, quant_word, m, build_ef))

def answers(extra):
    return [set(call("INFER.VSIM", "bench", "FP32", q, "COUNT", 10, *extra)) for q in queries]

def rate(extra, k):
    """VSIM/s and VSIM per server CPU-second with k clients (bench/vsim_clients)."""
    c0 = cpu_seconds()
    out = subprocess.run([load_client, str(port), "bench", prefix + ".queries", str(dim), str(k), "COUNT", "10"]
                         + [str(x) for x in extra], check=True, capture_output=True, text=True).stdout.split()
    return float(out[5]), float(out[1]) / (cpu_seconds() - c0)

try:
    import numpy as np
    X = np.frombuffer(data, dtype=np.float32).reshape(n, dim)
    Qm = np.frombuffer(query_bytes, dtype=np.float32).reshape(nq, dim)
    Xn = X / np.linalg.norm(X, axis=1, keepdims=True)
    Qn = Qm / np.linalg.norm(Qm, axis=1, keepdims=True)
    float_truth = [set(b"e%d" % i for i in np.argpartition(-(Xn @ q), 10)[:10]) for q in Qn]
except ImportError:
    np, float_truth = None, None

configs = [("TRUTH", ["TRUTH"])] + [("EF %d" % ef, ["EF", ef]) for ef in efs]
measured = {}  # (label, clients) -> [(VSIM/s, per CPU-s) per round]
for _ in range(rounds):
    for label, extra in configs:
        for k in clients: measured.setdefault((label, k), []).append(rate(extra, k))
truth = answers(["TRUTH"])
for label, extra in configs:
    got = truth if label == "TRUTH" else answers(extra)
    parts = ["%-5s recall@10 %.3f" % (label, sum(len(a & t) for a, t in zip(got, truth)) / (10.0 * nq))]
    if float_truth:
        parts[0] += " (float %.3f)" % (sum(len(a & t) for a, t in zip(got, float_truth)) / (10.0 * nq))
    for k in clients:
        runs, base = measured[(label, k)], measured[("TRUTH", k)]
        ratio = statistics.median(r[0] / b[0] for r, b in zip(runs, base))
        parts.append("%d client%s %.0f VSIM/s (%.0f per CPU-s) %.1fx TRUTH" % (
            k, "s"[:k > 1], statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs), ratio))
    print("; ".join(parts))
print("MEMORY USAGE bench: %.1f MiB" % (int(call("MEMORY", "USAGE", "bench")) / 2**20))
call("DEL", "bench")

if want_hnswlib:
    try:
        import hnswlib
    except ImportError:
        print("hnswlib: not installed (Debian python3-hnswlib)")
        sys.exit(0)
    import importlib.metadata
    index = hnswlib.Index(space="cosine", dim=dim)
    index.init_index(max_elements=n, M=m, ef_construction=build_ef, random_seed=42)
    t0 = time.time()
    index.add_items(X, np.arange(n), num_threads=1)
    build_s = time.time() - t0
    print("hnswlib %s (float32, cosine, M %d, build EF %d, one thread): build %.1f s, %.0f adds/s"
          % (importlib.metadata.version("hnswlib"), m, build_ef, build_s, n / build_s))
    for ef in efs:
        index.set_ef(ef)
        t0 = time.time()
        labels, _ = index.knn_query(Qm, k=10, num_threads=1)
        dt = time.time() - t0
        found = sum(len(set(b"e%d" % i for i in labels[j]) & float_truth[j]) for j in range(nq))
        print("hnswlib EF %5d: recall@10 (float) %.3f, %.0f searches/s" % (ef, found / (10.0 * nq), nq / dt))
PY
