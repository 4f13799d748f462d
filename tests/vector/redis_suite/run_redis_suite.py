#!/usr/bin/python3
"""Runs Redis's own vector-set test suite (redis/redis, modules/vector-sets/test.py and tests/*.py, unmodified)
against the redis_infer module: a primary and a replica redis-server with the module, the suite's V* commands sent
as INFER.V*, and the tests that cannot apply to a module under Redis 7.0 skipped by name, each with its reason.

The suite's files are not part of this repository (docs/vector.md, "Redis's own test suite"): the directory is
taken from --suite-dir, else $INFER_REDIS_SUITE_DIR, else ../shared/redis-vector-sets beside the source tree, else
$INFER_BUILD_DIR/../redis-vector-sets. Exit status: 0 when every applicable test passes, 1 when one fails,
77 (ctest's skip) when python3-redis or the suite is missing.
"""
import argparse
import ctypes
import hashlib
import os
import signal
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import traceback

SKIP = 77

# Redis 8 command names the suite sends, and the module's names for them.
COMMANDS = ["VADD", "VCARD", "VDIM", "VEMB", "VGETATTR", "VINFO", "VISMEMBER", "VLINKS", "VRANDMEMBER", "VRANGE",
            "VREM", "VSETATTR", "VSIM"]

# Tests (by the suite's getname()) that cannot apply to a module under Redis 7.0, with the reason shown in the
# report and in docs/vector.md.
NOT_APPLICABLE = {
    "Vector set command ACL categories":
        "ACL CAT VECTORSET: the @vectorset category is Redis 8's own; a Redis 7.0 module cannot add ACL categories",
    "VSGlobalConfig.forceSingleThreadExec config: binary, errors, and effect on VADD/VSIM":
        "Redis 8's vset-force-single-threaded-execution config; the module decides per search whether it runs on "
        "the search threads",
    "vset-force-single-threaded-execution configuration testing":
        "Redis 8's vset-force-single-threaded-execution config, switched to yes and back",
    "vectorset-hnsw-max-threads configuration testing":
        "Redis 8's vectorset-hnsw-max-threads config; the module's thread counts are infer.* configs",
    "AOF rewrite of a vector set without aof_rewrite fails gracefully":
        "expects AOF rewrite of a vector set to fail; the module has an aof_rewrite callback, so it succeeds",
    "[regression] RESTORE rejects nodes with oversized max links":
        "edits Redis's own DUMP layout of a vector set (its per-node link fields); the module's layout differs",
    "[regression] RESTORE rejects an empty vector set":
        "a fixed DUMP payload of Redis 8's own vectorset type at RDB version 14; Redis 7.0 (RDB version 10) "
        "refuses it by version before any module sees it",
}

# Redis 8's vset-force-single-threaded-execution: the module has no such switch, its behaviour is that of "no"
# (searches may run on threads), so the shim answers GET with "no", accepts SET to "no" and refuses "yes".
FORCE_SINGLE_THREAD = "vset-force-single-threaded-execution"


def find_suite_dir(arg):
    here = os.path.dirname(os.path.abspath(__file__))
    source_root = os.path.abspath(os.path.join(here, "..", "..", ".."))
    candidates = [arg, os.environ.get("INFER_REDIS_SUITE_DIR"),
                  os.path.join(source_root, "..", "shared", "redis-vector-sets")]
    if os.environ.get("INFER_BUILD_DIR"):
        candidates.append(os.path.join(os.environ["INFER_BUILD_DIR"], "..", "redis-vector-sets"))
    for c in candidates:
        if c and os.path.isfile(os.path.join(c, "test.py")) and os.path.isdir(os.path.join(c, "tests")):
            return os.path.abspath(c)
    return None


def check_files(suite):
    """The suite's files must be the versions listed in suite_files.txt (this harness's expectations are theirs)."""
    listing = os.path.join(os.path.dirname(os.path.abspath(__file__)), "suite_files.txt")
    wrong = []
    with open(listing) as f:
        for line in f:
            if not line.strip() or line.startswith("#"):
                continue
            path, _commit, digest = line.split()
            try:
                with open(os.path.join(suite, path), "rb") as g:
                    if hashlib.sha256(g.read()).hexdigest() != digest:
                        wrong.append(path + " (differs)")
            except OSError:
                wrong.append(path + " (missing)")
    return wrong


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def die_with_parent():
    """The server gets SIGTERM when the harness dies (a ctest timeout kills only the harness)."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class Server:
    """A redis-server with the module on a free loopback port, in its own temporary directory."""

    def __init__(self, module, name):
        self.dir = tempfile.mkdtemp(prefix=f"infer-redis-suite-{name}-")
        self.port = free_port()
        self.log = os.path.join(self.dir, "redis.log")
        args = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--dir", self.dir, "--daemonize", "no", "--logfile", self.log, "--enable-debug-command", "yes",
                "--loadmodule", module]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     preexec_fn=die_with_parent)
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.05)
        raise RuntimeError(f"redis-server did not start; log:\n{self.tail()}")

    def alive(self):
        return self.proc.poll() is None

    def tail(self, lines=30):
        try:
            with open(self.log, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self):
        if self.alive():
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def install_shim(redis):
    """Makes redis-py send the suite's commands under the module's names and speak RESP3 where asked."""
    from redis.connection import Connection, PythonParser
    from redis.exceptions import ResponseError

    mapped = {c: "INFER." + c for c in COMMANDS}
    original_execute = redis.Redis.execute_command

    def execute_command(self, *args, **options):
        if args and isinstance(args[0], str):
            name = args[0].upper()
            if name in mapped:
                args = (mapped[name],) + args[1:]
            # redis-py's config_get/config_set send "CONFIG GET" as one word and parse the reply; the suite's
            # execute_command('CONFIG', 'GET', ...) gets the raw reply.
            words = name.split() + [str(a) for a in args[1:]]
            if len(words) >= 3 and words[0] == "CONFIG" and words[2].lower() == FORCE_SINGLE_THREAD:
                return config_force_single_thread(words, parsed=" " in name)
        return original_execute(self, *args, **options)

    def config_force_single_thread(words, parsed):
        sub = words[1].upper()
        if sub == "GET":
            return {FORCE_SINGLE_THREAD: "no"} if parsed else [FORCE_SINGLE_THREAD.encode(), b"no"]
        if sub == "SET" and len(words) == 4 and words[3].lower() == "no":
            return True if parsed else b"OK"
        raise ResponseError(f"the module has no {FORCE_SINGLE_THREAD} switch (its searches may use threads)")

    redis.Redis.execute_command = execute_command

    # Debian 12's redis-py (4.3) predates RESP3 (protocol=3 came in 5.0): a parser for RESP3's types and a
    # connection that sends HELLO 3, with redis-py 5's shapes (maps as dicts, doubles as floats).
    class Resp3Parser(PythonParser):
        def read_response(self, disable_decoding=False):
            raw = self._buffer.readline()
            if not raw:
                return super().read_response(disable_decoding)
            byte, rest = raw[:1], raw[1:]
            if byte in (b"*", b"~", b">"):
                n = int(rest)
                return None if n == -1 else [self.read_response(disable_decoding) for _ in range(n)]
            if byte == b"%":
                n = int(rest)
                out = {}
                for _ in range(n):
                    k = self.read_response(disable_decoding)
                    out[k if not isinstance(k, list) else tuple(k)] = self.read_response(disable_decoding)
                return out
            if byte == b"|":
                for _ in range(2 * int(rest)):
                    self.read_response(disable_decoding)
                return self.read_response(disable_decoding)
            if byte == b"_":
                return None
            if byte == b",":
                return float(rest)
            if byte == b"#":
                return rest == b"t"
            if byte == b"(":
                return int(rest)
            if byte in (b"$", b"=", b"!"):
                n = int(rest)
                if n == -1:
                    return None
                data = self._buffer.read(n)
                if byte == b"=":
                    data = data[4:]
                if byte == b"!":
                    return self.parse_error(data.decode("utf-8", errors="replace"))
                return data if disable_decoding else self.encoder.decode(data)
            if byte == b"-":
                return self.parse_error(rest.decode("utf-8", errors="replace"))
            if byte == b"+":
                return rest if disable_decoding else self.encoder.decode(rest)
            if byte == b":":
                return int(rest)
            raise ResponseError(f"Protocol error: {raw!r}")

    class Resp3Connection(Connection):
        def __init__(self, **kwargs):
            kwargs["parser_class"] = Resp3Parser
            super().__init__(**kwargs)

        def on_connect(self):
            super().on_connect()
            self.send_command("HELLO", "3")
            reply = self.read_response()
            if isinstance(reply, Exception):
                raise reply

    original_init = redis.Redis.__init__

    def init(self, *args, protocol=None, **kwargs):
        original_init(self, *args, **kwargs)
        if protocol in (3, "3"):
            self.connection_pool.connection_class = Resp3Connection

    redis.Redis.__init__ = init


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite-dir", help="directory holding the suite's test.py and tests/")
    parser.add_argument("--module", help="path of redis_infer.so (default: $INFER_BUILD_DIR/src/redis/redis_infer.so)")
    parser.add_argument("--only", action="append", default=[], help="run only tests whose name contains this")
    parser.add_argument("--all", action="store_true", help="also run the tests listed as not applicable")
    parser.add_argument("--any-version", action="store_true", help="run suite files that differ from suite_files.txt")
    args = parser.parse_args()

    try:
        import redis
    except ImportError:
        print("redis_suite: skipped: python3-redis is not installed (apt-get install python3-redis)")
        return SKIP
    suite = find_suite_dir(args.suite_dir)
    if not suite:
        print("redis_suite: skipped: Redis's vector-set test files were not found "
              "(--suite-dir, $INFER_REDIS_SUITE_DIR or ../shared/redis-vector-sets; see docs/vector.md)")
        return SKIP
    wrong = check_files(suite)
    if wrong and not args.any_version:
        print(f"redis_suite: {suite} is not the listed version of the suite (suite_files.txt): " + ", ".join(wrong))
        return 1
    module = args.module or os.path.join(os.environ.get("INFER_BUILD_DIR", "build/release"), "src", "redis",
                                         "redis_infer.so")
    if not os.path.isfile(module):
        print(f"redis_suite: the module is not built: {module}")
        return 1

    install_shim(redis)
    primary = Server(os.path.abspath(module), "primary")
    replica = Server(os.path.abspath(module), "replica")
    try:
        # The suite imports its runner as `test` and its cases as `tests.<file>` from the working directory.
        os.chdir(suite)
        sys.path.insert(0, suite)
        sys.modules.pop("test", None)
        import test as suite_runner
        cases = suite_runner.find_test_classes(primary.port, replica.port)
        cases.sort(key=lambda t: t.estimated_runtime())
        # The runner reports a file it cannot import and goes on: here that is a failure, not fewer tests.
        unloaded = [f for f in sorted(os.listdir("tests"))
                    if f.endswith(".py") and f"tests.{f[:-3]}" not in sys.modules]
        if not cases or unloaded:
            print(f"redis_suite: the suite's runner found {len(cases)} tests; could not load: {unloaded}")
            return 1

        passed, failed, skipped = [], [], []
        started = time.time()
        for case in cases:
            name = case.getname()
            if args.only and not any(o.lower() in name.lower() for o in args.only):
                continue
            if name in NOT_APPLICABLE and not args.all:
                skipped.append(name)
                print(f"SKIP {name}: {NOT_APPLICABLE[name]}", flush=True)
                continue
            t0 = time.time()
            ok = case.run()
            took = time.time() - t0
            if not primary.alive() or not replica.alive():
                ok = False
                case.error_msg = (case.error_msg or "") + " [a server exited]\n" + primary.tail() + replica.tail()
            (passed if ok else failed).append(name)
            print(f"{'OK  ' if ok else 'FAIL'} {name} ({took:.2f}s)", flush=True)
            if not ok:
                print(f"     {case.error_msg}")
                if case.error_details:
                    print("     " + case.error_details.strip().replace("\n", "\n     "))
            if not primary.alive() or not replica.alive():
                break
        print(f"\nredis_suite: {len(passed)} passed, {len(failed)} failed, {len(skipped)} not applicable, "
              f"{len(passed) + len(failed) + len(skipped)} of {len(cases)} run, {time.time() - started:.1f}s")
        for name in failed:
            print(f"  failed: {name}")
        return 1 if failed else 0
    except Exception:
        traceback.print_exc()
        return 1
    finally:
        primary.stop()
        replica.stop()


if __name__ == "__main__":
    sys.exit(main())
