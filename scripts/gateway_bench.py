#!/usr/bin/python3
"""Gateway benchmark (scripts/gateway_bench.sh runs it): the latency `infer gateway` adds to a request,
and many concurrent streaming clients through one gateway.

1. Added latency: the same one-token generation (`INFER.GENERATE model PROMPT Hi MAXTOKENS 1 TEMP 0`)
   sent directly over RESP and as POST /v1/completions through the gateway, alternating, N times each;
   prints both medians and p99s and their difference.
2. Load: C clients at once, each streaming a completion of T tokens through the gateway; every response
   must be 200 with a complete SSE stream ending in [DONE], or 429 (the module's BUSY); prints counts.
Standard library only (Debian's /usr/bin/python3)."""
import http.client
import json
import socket
import statistics
import sys
import threading
import time

from resp_client import encode, read_reply


def resp_command(sock, *args):
    sock.sendall(encode(*args))
    return read_reply(sock.makefile("rb"))


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]


def added_latency(redis_port, gw_port, model, n):
    sock = socket.create_connection(("127.0.0.1", redis_port))
    conn = http.client.HTTPConnection("127.0.0.1", gw_port)
    body = json.dumps({"model": model, "prompt": "Hi", "max_tokens": 1, "temperature": 0})
    direct, gateway = [], []
    for i in range(n):
        t0 = time.perf_counter()
        resp_command(sock, "INFER.GENERATE", model, "PROMPT", "Hi", "MAXTOKENS", "1", "TEMP", "0")
        direct.append((time.perf_counter() - t0) * 1e3)
        t0 = time.perf_counter()
        conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
        r = conn.getresponse()
        r.read()
        if r.status != 200:
            sys.exit("gateway answered %d" % r.status)
        gateway.append((time.perf_counter() - t0) * 1e3)
    d50, g50 = statistics.median(direct), statistics.median(gateway)
    print("added latency, %d one-token generations each, alternating:" % n)
    print("  direct RESP  median %.3f ms  p99 %.3f ms" % (d50, pct(direct, 0.99)))
    print("  via gateway  median %.3f ms  p99 %.3f ms" % (g50, pct(gateway, 0.99)))
    print("  the gateway adds %.3f ms at the median" % (g50 - d50))


def load(gw_port, model, clients, tokens):
    results = {"ok": 0, "busy": 0, "bad": 0}
    lock = threading.Lock()
    tokens_seen = []

    def one():
        conn = http.client.HTTPConnection("127.0.0.1", gw_port, timeout=600)
        body = json.dumps({"model": model, "prompt": "Once upon a time", "max_tokens": tokens,
                           "stream": True, "stream_options": {"include_usage": True}})
        conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
        r = conn.getresponse()
        data = r.read().decode()
        with lock:
            if r.status == 429:
                results["busy"] += 1
            elif r.status == 200 and data.rstrip().endswith("data: [DONE]"):
                results["ok"] += 1
                for line in data.splitlines():
                    if line.startswith("data: {") and '"usage"' in line:
                        u = json.loads(line[6:]).get("usage")
                        if u:
                            tokens_seen.append(u["completion_tokens"])
            else:
                results["bad"] += 1
                print("unexpected: %d %s" % (r.status, data[:200]))

    t0 = time.perf_counter()
    threads = [threading.Thread(target=one) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    s = time.perf_counter() - t0
    print("load: %d concurrent streaming clients x %d tokens: %d complete, %d refused with 429, %d other "
          "(%.1f s, %d tokens streamed)" % (clients, tokens, results["ok"], results["busy"], results["bad"], s,
                                             sum(tokens_seen)))
    return results["bad"]


if __name__ == "__main__":
    redis_port, gw_port, model = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    n, clients, tokens = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
    added_latency(redis_port, gw_port, model, n)
    sys.exit(1 if load(gw_port, model, clients, tokens) else 0)
