#!/usr/bin/env bash
# The semantic cache through a real redis-server with stories260K: fills a CACHE set with N entries
# (pipelined INFER.GENERATE misses of distinct prompts, THRESHOLD 1 so that none is answered by a
# neighbour), then times Q hits end to end (one client, one request at a time, round trip included) of
# INFER.GENERATE ... CACHE against it, next to the same hits on a 10-entry set, a plain INFER.EMBED of
# the prompt (the embedding every lookup makes) and a miss. Last, E entries with TTL 1 expire and the
# sweep's main-thread time is read from INFER.STATS.
#   scripts/cache_bench.sh [build-dir] [N=10000] [Q=500] [E=2000]
set -euo pipefail
BUILD=${1:-build/release}
N=${2:-10000}
Q=${3:-500}
E=${4:-2000}
MODULE=$(realpath "$BUILD/src/redis/redis_infer.so")
MODEL=${INFER_MODELS_DIR:-$(realpath -m "$(dirname "$0")/../../shared/models")}/stories260K.gguf
PORT=${PORT:-$((20000 + RANDOM % 20000))}
DIR=$(mktemp -d)
trap 'redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$DIR"' EXIT

redis-server --port "$PORT" --bind 127.0.0.1 --save '' --dir "$DIR" --daemonize yes \
  --logfile "$DIR/redis.log" --loadmodule "$MODULE" MODEL stories "$MODEL" >/dev/null
for _ in $(seq 100); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done

PYTHONPATH="$(dirname "$0")" /usr/bin/python3 - "$PORT" "$N" "$Q" "$E" <<'PY'
import random, socket, sys, time

port, n, nq, ne = (int(x) for x in sys.argv[1:5])
sock = socket.create_connection(("127.0.0.1", port))
sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
rf = sock.makefile("rb")

from resp_client import encode as enc, read_reply


def read():
    return read_reply(rf)

def call(*args):
    sock.sendall(enc(*args))
    return read()

names = ["Lily", "Tom", "Ben", "Sue", "Max", "Anna", "Tim", "Mia", "Sam", "Zoe"]
things = ["ball", "cat", "dog", "tree", "cake", "boat", "bird", "car", "hat", "book", "kite", "fish"]
places = ["park", "garden", "house", "river", "school", "forest", "beach", "shop"]
def prompt(i):
    r = random.Random(i)
    return "%s saw a %s %s in the %s on day %d." % (r.choice(names), r.choice(["big", "small", "red", "blue", "old", "new"]),
                                                   r.choice(things), r.choice(places), i)

GEN = ["TEMP", "0", "MAXTOKENS", "4"]
def fill(key, count, extra=(), threshold="1"):
    t0 = time.time()
    for start in range(0, count, 64):
        batch = range(start, min(count, start + 64))
        sock.sendall(b"".join(enc("INFER.GENERATE", "stories", "PROMPT", prompt(i), "CACHE", key, "THRESHOLD",
                                  threshold, *extra, *GEN) for i in batch))
        for _ in batch: read()
    return time.time() - t0

def timed(args, reps):
    lat = []
    for i in range(reps):
        t = time.perf_counter()
        call(*args(i))
        lat.append((time.perf_counter() - t) * 1000)
    lat.sort()
    return lat

def show(label, lat):
    p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]
    print("%-44s p50 %.3f  p90 %.3f  p99 %.3f  mean %.3f ms" % (label, p(0.5), p(0.9), p(0.99), sum(lat) / len(lat)))

secs = fill("cache:big", n)
print("filled %s entries in %.1f s (%d misses)" % (call("INFER.VCARD", "cache:big").decode(), secs, n))
fill("cache:small", 10)
stats = lambda: dict(zip(*[iter(call("INFER.STATS"))] * 2))
before = stats()
hit = lambda key: (lambda i: ("INFER.GENERATE", "stories", "PROMPT", prompt(i % 10), "CACHE", key, *GEN))
for _ in range(2):  # alternating, on a shared machine
    show("hit, %d-entry cache" % n, timed(hit("cache:big"), nq))
    show("hit, 10-entry cache", timed(hit("cache:small"), nq))
    show("INFER.EMBED of the prompt", timed(lambda i: ("INFER.EMBED", "stories", prompt(i % 10)), nq))
    show("miss (THRESHOLD 1, another prompt each time)",
         timed(lambda i: ("INFER.GENERATE", "stories", "PROMPT", prompt(10**6 + i + random.random()), "CACHE",
                          "cache:miss", "THRESHOLD", "1", *GEN), nq // 5))
after = stats()
print("hits counted: %d, generations during the hits: %d" % (
    int(after[b"cache_hits"]) - int(before[b"cache_hits"]),
    int(after[b"generate_requests"]) - int(before[b"generate_requests"]) - nq // 5 * 2))
timing = dict(zip(*[iter(after[b"main_thread_us"])] * 2))
for name in (b"infer.generate", b"infer.generate reply", b"infer write queue"):
    if name in timing:
        t = dict(zip(*[iter(timing[name])] * 2))
        print("main thread %-22s max_cpu_us %s avg_us %s" % (name.decode(), t[b"max_cpu_us"].decode(), t[b"avg_us"].decode()))

fill("cache:ttl", ne, ("TTL", "1"))
t0 = time.time()
while int(call("INFER.VCARD", "cache:ttl")) > 0 and time.time() - t0 < 120: time.sleep(0.2)
swept = time.time() - t0
t = dict(zip(*[iter(dict(zip(*[iter(stats()[b"main_thread_us"])] * 2))[b"infer cache sweep"])] * 2))
print("sweep: %d expired entries gone %.1f s after the fill; per tick max_us %s max_cpu_us %s avg_us %s" % (
    ne, swept, t[b"max_us"].decode(), t[b"max_cpu_us"].decode(), t[b"avg_us"].decode()))
PY
