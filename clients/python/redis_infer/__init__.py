"""redis-infer's Python client: the module's INFER.* commands as methods with typed results, on redis-py
(``redis.Redis`` or ``redis.cluster.RedisCluster``, RESP2, and RESP3 where redis-py speaks it).

    from redis import Redis
    from redis_infer import Infer
    ai = Infer(Redis())
    print(ai.generate("qwen", "Once upon a time", max_tokens=32).text)
"""
from .client import Infer
from .errors import BusyError, InferError, UnknownModelError
from .results import GenerateResult, RagResult, RagSource, ToolCall, TokenLogprob, VsimHit

__all__ = ["Infer", "InferError", "BusyError", "UnknownModelError", "GenerateResult", "RagResult", "RagSource",
           "ToolCall", "TokenLogprob", "VsimHit"]
