"""Module errors as exceptions carrying the module's own message."""
import redis


class InferError(Exception):
    """The module refused a command; ``str(e)`` is its message (e.g. "MAXTOKENS must be in 1..4096")."""


class BusyError(InferError):
    """The model's queue is full (the module's -BUSY): retry later."""


class UnknownModelError(InferError):
    """No model of that name is loaded (INFER.MODELS lists them)."""


def translate(e: redis.exceptions.ResponseError) -> InferError:
    msg = str(e)
    if msg.startswith("BUSY "):
        return BusyError(msg[5:])
    if msg.startswith("unknown model"):
        return UnknownModelError(msg)
    return InferError(msg)
