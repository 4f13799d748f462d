"""RESP2 for the benchmark scripts (scripts/*_bench.*): commands encoded as arrays of bulk strings and
replies read from a socket's file, pipelining left to the caller. Standard library only."""


def encode(*args) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def read_reply(f):
    """One reply from `f` (socket.makefile("rb")): bytes, a list, None; an error reply raises RuntimeError."""
    line = f.readline()
    t, rest = line[:1], line[1:-2]
    if t in (b"+", b":"):
        return rest
    if t == b"-":
        raise RuntimeError(rest.decode())
    if t == b"$":
        n = int(rest)
        return None if n < 0 else f.read(n + 2)[:-2]
    if t == b"*":
        n = int(rest)
        return None if n < 0 else [read_reply(f) for _ in range(n)]
    raise RuntimeError("bad reply %r" % line)
