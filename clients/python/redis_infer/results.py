"""Typed results of the module's replies (RESP2 flat key/value arrays and RESP3 maps alike)."""
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional


def text(v) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else ("" if v is None else str(v))


def as_map(reply) -> Dict[str, Any]:
    """A RESP3 map (dict) or a RESP2 flat [key, value, ...] list as a dict with str keys."""
    if isinstance(reply, dict):
        return {text(k): v for k, v in reply.items()}
    if isinstance(reply, (list, tuple)):
        return {text(reply[i]): reply[i + 1] for i in range(0, len(reply) - 1, 2)}
    return {}


@dataclass
class TokenLogprob:
    id: int
    token: bytes
    logprob: float
    top_logprobs: List["TokenLogprob"] = field(default_factory=list)

    @staticmethod
    def parse(reply) -> "TokenLogprob":
        m = as_map(reply)
        tok = m.get("token", b"")
        return TokenLogprob(int(m.get("id", 0)), tok if isinstance(tok, bytes) else str(tok).encode(),
                            float(m.get("logprob", 0)), [TokenLogprob.parse(a) for a in m.get("top_logprobs") or []])


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str  # compact JSON object text

    @staticmethod
    def parse(reply) -> "ToolCall":
        m = as_map(reply)
        return ToolCall(text(m.get("id")), text(m.get("name")), text(m.get("arguments")))


@dataclass
class GenerateResult:
    text: str
    finish: str = ""
    prompt_tokens: int = 0
    cached_tokens: int = 0
    generated_tokens: int = 0
    seed: int = 0
    ids: List[int] = field(default_factory=list)
    tool_calls: List[ToolCall] = field(default_factory=list)
    logprobs: Optional[List[TokenLogprob]] = None
    stats: Dict[str, Any] = field(default_factory=dict)  # every WITHSTATS field as sent

    @staticmethod
    def parse(reply) -> "GenerateResult":
        if isinstance(reply, (bytes, str)):
            return GenerateResult(text(reply))
        m = as_map(reply)
        r = GenerateResult(text(m.get("text")), text(m.get("finish")))
        for name in ("prompt_tokens", "cached_tokens", "generated_tokens", "seed"):
            if name in m:
                setattr(r, name, int(m[name]))
        r.ids = [int(i) for i in m.get("ids") or []]
        r.tool_calls = [ToolCall.parse(c) for c in m.get("tool_calls") or []]
        if "logprobs" in m:
            r.logprobs = [TokenLogprob.parse(t) for t in m["logprobs"]]
        r.stats = {k: (text(v) if isinstance(v, bytes) else v) for k, v in m.items()
                   if k not in ("text", "ids", "tool_calls", "logprobs")}
        return r


@dataclass
class RagSource:
    element: str
    score: float
    key: str
    status: str  # used, missing or invalid


@dataclass
class RagResult(GenerateResult):
    sources: List[RagSource] = field(default_factory=list)

    @staticmethod
    def parse(reply) -> "RagResult":
        g = GenerateResult.parse(reply)
        r = RagResult(**g.__dict__)
        for s in as_map(reply).get("sources") or []:
            r.sources.append(RagSource(text(s[0]), float(s[1]), text(s[2]), text(s[3])))
        return r


@dataclass
class VsimHit:
    element: str
    score: Optional[float] = None
    attributes: Optional[str] = None
