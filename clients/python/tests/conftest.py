"""Fixtures: a real redis-server with the module built in this tree (INFER_BUILD_DIR, default
build/release) and stories260K (INFER_MODELS_DIR), and a 3-primary Redis Cluster of such servers."""
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import pytest
import redis
from redis.cluster import RedisCluster

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))


def module_path():
    return os.path.join(os.environ.get("INFER_BUILD_DIR", os.path.join(ROOT, "build", "release")),
                        "src", "redis", "redis_infer.so")


def model_path():
    return os.path.join(os.environ.get("INFER_MODELS_DIR", os.path.join(ROOT, "..", "shared", "models")),
                        "stories260K.gguf")


def ephemeral_range():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
            return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


def bindable(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def free_port(cluster):
    # Ports the kernel hands out to other tests' sockets (the ephemeral range) are avoided, and a
    # cluster node also needs its port + 10000 (the cluster bus) free.
    lo, hi = ephemeral_range()
    rng = random.Random()
    while True:
        port = rng.randrange(10000, 55000)
        ports = (port, port + 10000) if cluster else (port,)
        if any(lo <= p <= hi for p in ports):
            continue
        if all(bindable(p) for p in ports):
            return port


class Server:
    def __init__(self, extra=()):
        self.dir = tempfile.mkdtemp(prefix="infer-py-")
        # A port can be taken between the probe and redis-server's bind: try a few.
        for _ in range(5):
            self.port = free_port("--cluster-enabled" in extra)
            if self._start(extra):
                return
        raise RuntimeError("redis-server did not start: " + self._log()[-2000:])

    def _log(self):
        try:
            with open(os.path.join(self.dir, "redis.log")) as f:
                return f.read()
        except OSError:
            return ""

    def _start(self, extra):
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", self.dir, "--logfile", os.path.join(self.dir, "redis.log"), *extra,
             "--loadmodule", module_path(), "MODEL", "stories", model_path(), "THREADS", "1"])
        client = redis.Redis(port=self.port)
        for _ in range(200):
            if self.proc.poll() is not None:
                if "Address already in use" in self._log():
                    os.remove(os.path.join(self.dir, "redis.log"))
                    for leftover in ("nodes.conf",):
                        try:
                            os.remove(os.path.join(self.dir, leftover))
                        except OSError:
                            pass
                    return False
                raise RuntimeError("redis-server exited: " + self._log()[-2000:])
            try:
                client.ping()
                return True
            except redis.exceptions.ConnectionError:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not start: " + self._log()[-2000:])

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)
        shutil.rmtree(self.dir, ignore_errors=True)


def require_data():
    for path, what in ((module_path(), "the module"), (model_path(), "stories260K")):
        if not os.path.exists(path):
            if os.environ.get("CI") == "true":
                pytest.fail("%s is missing: %s" % (what, path))
            pytest.skip("%s is missing: %s" % (what, path))


@pytest.fixture(scope="session")
def server():
    require_data()
    s = Server()
    yield s
    s.stop()


@pytest.fixture
def r(server):
    client = redis.Redis(port=server.port)
    client.flushall()
    return client


@pytest.fixture(scope="session")
def cluster():
    require_data()
    nodes = [Server(("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "1000"))
             for _ in range(3)]
    try:
        clients = [redis.Redis(port=n.port) for n in nodes]
        per = 16384 // 3
        for i, c in enumerate(clients):
            hi = 16383 if i == 2 else (i + 1) * per - 1
            c.execute_command("CLUSTER", "ADDSLOTSRANGE", i * per, hi)
        for c in clients[1:]:
            c.execute_command("CLUSTER", "MEET", "127.0.0.1", nodes[0].port)
        deadline = time.time() + 30
        while time.time() < deadline:
            if all(b"cluster_state:ok" in c.execute_command("CLUSTER", "INFO") for c in clients) and \
                    all(len(c.execute_command("CLUSTER", "SLOTS")) == 3 for c in clients):
                break
            time.sleep(0.1)
        else:
            raise RuntimeError("the cluster did not form")
        rc = RedisCluster(host="127.0.0.1", port=nodes[0].port)
        yield rc
        rc.close()
    finally:
        for n in nodes:
            n.stop()
