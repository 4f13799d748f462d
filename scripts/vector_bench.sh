#!/usr/bin/env bash
# Vector sets through a real redis-server, with hnswlib beside them. The vectors come from bench_vector
# (INFER_BENCH_WRITE), so the in-process benchmark, this script and hnswlib see the same data:
#   DATASET=gaussian   (default) N random DIM-d Gaussian vectors (DIM 256), HNSW's worst case
#   DATASET=clustered  N vectors with the structure of real embeddings (bench/clustered_embeddings.h, DIM 384)
# Measures VADD/s (pipelined INFER.VADD FP32, links M and build EF from the environment, QUANT q8 / noquant /
# bin), then, over Q queries, the exact scan (INFER.VSIM ... TRUTH) and for each search EF the recall@10
# against TRUTH and against the exact float neighbours (numpy), and VSIM/s with 1 client and with each count
# of CLIENTS (one query at a time per client, round trips included; each client runs every query, from its
# own starting point). With python3-hnswlib installed, the same vectors in hnswlib (cosine, float32, the same
# M and build EF, one thread): build time, and per EF recall@10 against the float neighbours and searches/s
# (one query at a time). Sets this large search on the module's search threads.
#   [DATASET=gaussian] [M=16] [BUILD_EF=200] [QUANT=q8] [CLIENTS="1 8"] [HNSWLIB=1]
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
MODULE=$(realpath "$BUILD/src/redis/redis_infer.so")
PORT=${PORT:-$((20000 + RANDOM % 20000))}
DIR=$(mktemp -d)
trap 'redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$DIR"' EXIT

INFER_BENCH_DATASET=$DATASET INFER_BENCH_VECTORS=$N INFER_BENCH_DIM=$DIM INFER_BENCH_QUERIES=$Q \
  INFER_BENCH_WRITE="$DIR/set" "$BUILD/bench/bench_vector" >/dev/null 2>&1
redis-server --port "$PORT" --bind 127.0.0.1 --save '' --dir "$DIR" --daemonize yes \
  --logfile "$DIR/redis.log" --loadmodule "$MODULE" >/dev/null
for _ in $(seq 100); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done

/usr/bin/python3 - "$PORT" "$N" "$DIM" "$Q" "$EFS" "$M" "$BUILD_EF" "$QUANT" "$CLIENTS" "$HNSWLIB" "$DIR/set" <<'PY'
import multiprocessing, socket, sys, time

port, n, dim, nq = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
efs = [int(x) for x in sys.argv[5].split()]
m, build_ef, quant = int(sys.argv[6]), int(sys.argv[7]), sys.argv[8].upper()
clients = [int(x) for x in sys.argv[9].split()]
want_hnswlib, prefix = sys.argv[10] == "1", sys.argv[11]
row = 4 * dim
with open(prefix + ".data", "rb") as f: data = f.read()
with open(prefix + ".queries", "rb") as f: query_bytes = f.read()
vectors = [data[i * row:(i + 1) * row] for i in range(n)]
queries = [query_bytes[i * row:(i + 1) * row] for i in range(nq)]

class Conn:
    def __init__(self):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.rf = self.sock.makefile("rb")

    def send(self, *cmds): self.sock.sendall(b"".join(cmds))

    def read(self):
        line = self.rf.readline()
        t, rest = line[:1], line[1:-2]
        if t in (b"+", b":"): return rest
        if t == b"-": raise RuntimeError(rest.decode())
        if t == b"$":
            if int(rest) < 0: return None
            return self.rf.read(int(rest) + 2)[:-2]
        if t == b"*": return [self.read() for _ in range(int(rest))]
        raise RuntimeError("bad reply " + repr(line))

    def call(self, *args):
        self.send(enc(*args))
        return self.read()

def enc(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)

conn = Conn()
def cpu_seconds():
    # redis-server's user + system CPU time (main thread and search threads): rates per CPU-second stay
    # comparable on a machine shared with other work, where wall-clock rates do not.
    info = dict(l.split(":", 1) for l in conn.call("INFO", "cpu").decode().split("\r\n") if ":" in l)
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])

quant_word = {"Q8": "Q8", "NOQUANT": "NOQUANT", "F32": "NOQUANT", "BIN": "BIN"}[quant]
t0, c0 = time.time(), cpu_seconds()
batch = 1000
for s in range(0, n, batch):
    conn.send(*[enc("INFER.VADD", "bench", "FP32", vectors[i], "e%d" % i, quant_word, "M", m, "EF", build_ef)
                for i in range(s, min(n, s + batch))])
    for _ in range(min(batch, n - s)): conn.read()
add_s, add_cpu = time.time() - t0, cpu_seconds() - c0
print("vectors %d dim %d: VADD %.0f/s, %.0f per CPU-second (build %.1f s, pipelined, %s, M %d, build EF %d)"
      % (n, dim, n / add_s, n / add_cpu, add_s, quant_word, m, build_ef))

def vsim(q, extra): return enc("INFER.VSIM", "bench", "FP32", q, "COUNT", 10, *extra)

def client_run(extra, start, barrier, out):
    c = Conn()
    barrier.wait()
    t = time.time()
    for j in range(nq):
        c.send(vsim(queries[(start + j) % nq], extra))
        c.read()
    out.put((t, time.time()))

def rate(extra, nclients):
    """VSIM/s and per server CPU-second with nclients, each running every query once."""
    if nclients == 1:
        t0, c0 = time.time(), cpu_seconds()
        replies = []
        for q in queries:
            conn.send(vsim(q, extra))
            replies.append(set(conn.read()))
        return nq / (time.time() - t0), nq / (cpu_seconds() - c0), replies
    ctx = multiprocessing.get_context("fork")
    barrier, out = ctx.Barrier(nclients + 1), ctx.Queue()
    procs = [ctx.Process(target=client_run, args=(extra, k * nq // nclients, barrier, out)) for k in range(nclients)]
    for p in procs: p.start()
    c0 = cpu_seconds()
    barrier.wait()
    spans = [out.get() for _ in procs]
    for p in procs: p.join()
    total = nclients * nq
    wall = max(e for _, e in spans) - min(s for s, _ in spans)
    return total / wall, total / (cpu_seconds() - c0), None

try:
    import numpy as np
    X = np.frombuffer(data, dtype=np.float32).reshape(n, dim)
    Qm = np.frombuffer(query_bytes, dtype=np.float32).reshape(nq, dim)
    Xn = X / np.linalg.norm(X, axis=1, keepdims=True)
    Qn = Qm / np.linalg.norm(Qm, axis=1, keepdims=True)
    float_truth = [set(b"e%d" % i for i in np.argsort(-(Xn @ q))[:10]) for q in Qn]
except ImportError:
    np, float_truth = None, None

def line(label, rates, recall=None, recall_f=None):
    parts = [label]
    if recall is not None: parts.append("recall@10 %.3f" % recall)
    if recall_f is not None: parts.append("float %.3f" % recall_f)
    for k, (r, rc) in zip(clients, rates): parts.append("%d client%s %.0f VSIM/s (%.0f per CPU-s)" % (k, "s"[:k > 1], r, rc))
    print(", ".join(parts))

truth = None
rates = []
for k in clients:
    r, rc, replies = rate(["TRUTH"], k)
    truth = replies if replies is not None else truth
    rates.append((r, rc))
if truth is None: truth = [set(conn.call("INFER.VSIM", "bench", "FP32", q, "COUNT", 10, "TRUTH")) for q in queries]
recall_f = sum(len(t & f) for t, f in zip(truth, float_truth)) / (10.0 * nq) if float_truth else None
line("TRUTH (linear scan)", rates, 1.0, recall_f)
for ef in efs:
    rates, replies = [], None
    for k in clients:
        r, rc, got = rate(["EF", ef], k)
        replies = got if got is not None else replies
        rates.append((r, rc))
    if replies is None: replies = [set(conn.call("INFER.VSIM", "bench", "FP32", q, "COUNT", 10, "EF", ef)) for q in queries]
    recall = sum(len(a & t) for a, t in zip(replies, truth)) / (10.0 * nq)
    recall_f = sum(len(a & t) for a, t in zip(replies, float_truth)) / (10.0 * nq) if float_truth else None
    line("EF %5d" % ef, rates, recall, recall_f)
print("MEMORY USAGE bench: %.1f MiB" % (int(conn.call("MEMORY", "USAGE", "bench")) / 2**20))
conn.call("DEL", "bench")

if want_hnswlib:
    try:
        import hnswlib
    except ImportError:
        print("hnswlib: not installed (Debian python3-hnswlib)")
        sys.exit(0)
    index = hnswlib.Index(space="cosine", dim=dim)
    index.init_index(max_elements=n, M=m, ef_construction=build_ef, random_seed=42)
    t0 = time.time()
    index.add_items(X, np.arange(n), num_threads=1)
    build_s = time.time() - t0
    import importlib.metadata
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
