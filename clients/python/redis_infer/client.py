"""``Infer(r)``: the module's commands on a redis-py client (docs/redis.md and docs/vector.md define them;
each keyword argument maps to one option)."""
import array
import json
import random
import threading
import uuid
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

import redis

from .errors import translate
from .results import GenerateResult, RagResult, VsimHit, as_map, text

try:
    from redis.cluster import RedisCluster
except ImportError:  # redis-py before 4.1
    RedisCluster = None

Vector = Sequence[float]


def _fp32(v: Vector) -> bytes:
    return array.array("f", [float(x) for x in v]).tobytes()


class Infer:
    """The INFER.* commands of a node or a cluster. ``r`` is a ``redis.Redis`` (RESP2, or RESP3 with
    ``protocol=3`` on redis-py 5+) or a ``redis.cluster.RedisCluster``; keyless commands go to a random
    primary of a cluster, keyed ones (token keys, vector sets, streams, STORE) to the key's owner."""

    def __init__(self, r):
        self.r = r
        self.cluster = RedisCluster is not None and isinstance(r, RedisCluster)

    # -- plumbing
    def _run(self, *args, keyed: bool = False):
        try:
            if self.cluster and not keyed:
                return self.r.execute_command(*args, target_nodes=random.choice(self.r.get_primaries()))
            return self.r.execute_command(*args)
        except redis.exceptions.ResponseError as e:
            raise translate(e) from None

    @staticmethod
    def _generation_options(args: List[Any], *, max_tokens=None, temperature=None, top_k=None, top_p=None,
                            min_p=None, repeat_penalty=None, seed=None, stop=None, timeout_ms=None,
                            logprobs=None, json_schema=None, grammar=None, json_output=False, tools=None,
                            tool_choice=None, chat_args=None, template=None, stream_key=None, cache=None) -> None:
        pairs = [("MAXTOKENS", max_tokens), ("TEMP", temperature), ("TOPK", top_k), ("TOPP", top_p),
                 ("MINP", min_p), ("REPEAT-PENALTY", repeat_penalty), ("SEED", seed), ("TIMEOUT", timeout_ms),
                 ("LOGPROBS", logprobs), ("TEMPLATE", template)]
        for word, value in pairs:
            if value is not None:
                args += [word, value]
        for s in [stop] if isinstance(stop, str) else (stop or []):
            args += ["STOP", s]
        if tools is not None:
            args += ["TOOLS", tools if isinstance(tools, str) else json.dumps(tools)]
            if tool_choice is not None:
                args += ["TOOLCHOICE", tool_choice]
        if chat_args is not None:
            args += ["CHATARGS", chat_args if isinstance(chat_args, str) else json.dumps(chat_args)]
        if json_output:
            args += ["FORMAT", "json"]
        if json_schema is not None:
            args += ["JSONSCHEMA", json_schema if isinstance(json_schema, str) else json.dumps(json_schema)]
        if grammar is not None:
            args += ["GRAMMAR", grammar]
        if cache is not None:  # {"key": vset, "threshold": s, "ttl": seconds, "sampled": bool}
            cache = {"key": cache} if isinstance(cache, str) else cache
            args += ["CACHE", cache["key"]]
            if cache.get("threshold") is not None:
                args += ["THRESHOLD", cache["threshold"]]
            if cache.get("ttl") is not None:
                args += ["TTL", cache["ttl"]]
            if cache.get("sampled"):
                args.append("SAMPLED")
        args.append("WITHSTATS")
        if stream_key is not None:
            args += ["STREAM", stream_key]

    def _generate_args(self, model, prompt=None, *, tokens=None, chat=None, messages=None, **options):
        args: List[Any] = ["INFER.GENERATE", model]
        if tokens is not None:
            args += ["TOKENS", *([tokens] if isinstance(tokens, str) else tokens)]
            if prompt is not None:
                args += ["PROMPT", prompt]
        elif messages is not None:
            args += ["MESSAGES", messages if isinstance(messages, str) else json.dumps(messages)]
        elif chat is not None:
            args.append("CHAT")
            for role, content in chat:
                args += [role, content]
        else:
            args += ["PROMPT", prompt]
        self._generation_options(args, **options)
        return args, tokens is not None or options.get("stream_key") is not None or options.get("cache") is not None

    # -- generation
    def generate(self, model: str, prompt: Optional[str] = None, **options) -> GenerateResult:
        """INFER.GENERATE. ``prompt``, or ``tokens=[key, ...]`` (plus an optional prompt suffix),
        ``chat=[(role, text), ...]`` or ``messages=[{...}]``; options: max_tokens, temperature, top_k,
        top_p, min_p, repeat_penalty, seed, stop, timeout_ms, logprobs, json_schema, grammar,
        json_output, tools, tool_choice, chat_args, template, cache."""
        args, keyed = self._generate_args(model, prompt, **options)
        return GenerateResult.parse(self._run(*args, keyed=keyed))

    def chat(self, model: str, messages: List[Dict[str, Any]], **options) -> GenerateResult:
        """INFER.GENERATE ... MESSAGES: OpenAI-style messages through the model's own chat template."""
        return self.generate(model, messages=messages, **options)

    def stream(self, model: str, prompt: Optional[str] = None, *, stream_key: Optional[str] = None,
               block_ms: int = 1000, **options) -> Iterator[str]:
        """Yields the text as the module appends it to a Redis Stream (INFER.GENERATE ... STREAM key,
        read with XREAD BLOCK) until its ``finish`` entry; raises the command's error if it fails."""
        key = stream_key or "infer:stream:" + uuid.uuid4().hex
        args, _ = self._generate_args(model, prompt, stream_key=key, **options)
        outcome: Dict[str, Any] = {}

        def run():
            try:
                outcome["reply"] = self._run(*args, keyed=True)
            except Exception as e:  # raised in the caller's thread below
                outcome["error"] = e

        worker = threading.Thread(target=run, daemon=True)
        worker.start()
        last = "0-0"
        try:
            while True:
                reply = self.r.xread({key: last}, block=block_ms) or []
                entries = reply[0][1] if reply and not isinstance(reply, dict) else list(reply.values())[0][0] if reply else []
                for entry_id, fields in entries:
                    last = entry_id
                    f = {text(k): v for k, v in fields.items()}
                    if "finish" in f:
                        return
                    if f.get("text"):
                        yield text(f["text"])
                if not entries and not worker.is_alive() and "error" in outcome:
                    raise outcome["error"]
        finally:
            worker.join(timeout=60)

    def rag(self, model: str, vset: str, query: Optional[str] = None, *, vector: Optional[Vector] = None,
            question: Optional[str] = None, count: Optional[int] = None, ef: Optional[int] = None,
            filter: Optional[str] = None, filter_ef: Optional[int] = None, dockey: Optional[str] = None,
            embedder: Optional[str] = None, with_sources: bool = True, **options) -> RagResult:
        """INFER.RAG: search the set (by ``query`` text or ``vector``), copy the documents' tokens, generate."""
        args: List[Any] = ["INFER.RAG", model, vset]
        args += ["QUERY", query] if vector is None else ["FP32", _fp32(vector)]
        for word, value in (("QUESTION", question), ("COUNT", count), ("EF", ef), ("FILTER", filter),
                            ("FILTER-EF", filter_ef), ("DOCKEY", dockey), ("EMBEDDER", embedder)):
            if value is not None:
                args += [word, value]
        self._generation_options(args, **options)
        if with_sources:
            args.append("WITHSOURCES")
        return RagResult.parse(self._run(*args, keyed=True))

    # -- tokens and embeddings
    def tokenize(self, model: str, text_: str, *, special: bool = True, bos: bool = True) -> List[int]:
        args: List[Any] = ["INFER.TOKENIZE", model, text_] + ([] if special else ["NOSPECIAL"]) + ([] if bos else ["NOBOS"])
        return [int(i) for i in self._run(*args)]

    def store_tokens(self, model: str, text_: str, key: str, **kw) -> int:
        """INFER.TOKENIZE ... STORE key: the token count."""
        args: List[Any] = ["INFER.TOKENIZE", model, text_] + ([] if kw.get("special", True) else ["NOSPECIAL"]) + \
            ([] if kw.get("bos", True) else ["NOBOS"]) + ["STORE", key]
        return int(self._run(*args, keyed=True))

    def detokenize(self, model: str, ids: Optional[Sequence[int]] = None, *, key: Optional[str] = None) -> str:
        if key is not None:
            return text(self._run("INFER.DETOKENIZE", model, "KEY", key, keyed=True))
        return text(self._run("INFER.DETOKENIZE", model, *ids))

    def embed(self, model: str, text_: str, *, pooling: Optional[str] = None, normalize: bool = False) -> List[float]:
        args: List[Any] = ["INFER.EMBED", model, text_] + (["POOLING", pooling] if pooling else []) + \
            (["NORMALIZE"] if normalize else [])
        return array.array("f", self._run(*args)).tolist()

    def embed_store(self, model: str, text_: str, key: str, element: str, *, attributes=None,
                    pooling: Optional[str] = None, normalize: bool = False) -> bool:
        """INFER.EMBED ... STORE key element [SETATTR json]: True when the element is new."""
        args: List[Any] = ["INFER.EMBED", model, text_] + (["POOLING", pooling] if pooling else []) + \
            (["NORMALIZE"] if normalize else []) + ["STORE", key, element]
        if attributes is not None:
            args += ["SETATTR", attributes if isinstance(attributes, str) else json.dumps(attributes)]
        return bool(self._run(*args, keyed=True))

    # -- vector sets
    def vadd(self, key: str, vector: Vector, element: str, *, quant: Optional[str] = None, ef: Optional[int] = None,
             m: Optional[int] = None, attributes=None, reduce: Optional[int] = None) -> bool:
        args: List[Any] = ["INFER.VADD", key] + (["REDUCE", reduce] if reduce else []) + ["FP32", _fp32(vector), element]
        if quant:
            args.append(quant.upper())
        for word, value in (("EF", ef), ("M", m)):
            if value is not None:
                args += [word, value]
        if attributes is not None:
            args += ["SETATTR", attributes if isinstance(attributes, str) else json.dumps(attributes)]
        return bool(self._run(*args, keyed=True))

    def vsim(self, key: str, vector: Optional[Vector] = None, *, element: Optional[str] = None, count: Optional[int] = None,
             ef: Optional[int] = None, filter: Optional[str] = None, filter_ef: Optional[int] = None,
             epsilon: Optional[float] = None, truth: bool = False, nothread: bool = False,
             with_attributes: bool = False) -> List[VsimHit]:
        args: List[Any] = ["INFER.VSIM", key] + (["ELE", element] if element is not None else ["FP32", _fp32(vector)])
        args.append("WITHSCORES")
        if with_attributes:
            args.append("WITHATTRIBS")
        for word, value in (("COUNT", count), ("EF", ef), ("FILTER", filter), ("FILTER-EF", filter_ef),
                            ("EPSILON", epsilon)):
            if value is not None:
                args += [word, value]
        args += (["TRUTH"] if truth else []) + (["NOTHREAD"] if nothread else [])
        reply = self._run(*args, keyed=True)
        hits = []
        if isinstance(reply, dict):  # RESP3: element -> score or [score, attributes]
            for name, v in reply.items():
                score, attrs = (v[0], v[1]) if with_attributes else (v, None)
                hits.append(VsimHit(text(name), float(score), None if attrs is None else text(attrs)))
            return hits
        step = 3 if with_attributes else 2
        for i in range(0, len(reply), step):
            attrs = reply[i + 2] if with_attributes else None
            hits.append(VsimHit(text(reply[i]), float(reply[i + 1]), None if attrs is None else text(attrs)))
        return hits

    def vrem(self, key: str, element: str) -> bool:
        return bool(self._run("INFER.VREM", key, element, keyed=True))

    def vcard(self, key: str) -> int:
        return int(self._run("INFER.VCARD", key, keyed=True))

    def vdim(self, key: str) -> int:
        return int(self._run("INFER.VDIM", key, keyed=True))

    def vemb(self, key: str, element: str) -> Optional[List[float]]:
        reply = self._run("INFER.VEMB", key, element, keyed=True)
        return None if reply is None else [float(x) for x in reply]

    def vgetattr(self, key: str, element: str) -> Optional[Dict[str, Any]]:
        reply = self._run("INFER.VGETATTR", key, element, keyed=True)
        return None if reply is None else json.loads(text(reply))

    def vsetattr(self, key: str, element: str, attributes) -> bool:
        value = attributes if isinstance(attributes, str) else json.dumps(attributes)
        return bool(self._run("INFER.VSETATTR", key, element, value, keyed=True))

    def vismember(self, key: str, element: str) -> bool:
        return bool(self._run("INFER.VISMEMBER", key, element, keyed=True))

    def vrandmember(self, key: str, count: Optional[int] = None) -> Union[Optional[str], List[str]]:
        """No count: one random element or None; count > 0: distinct elements; count < 0: may repeat."""
        if count is None:
            reply = self._run("INFER.VRANDMEMBER", key, keyed=True)
            return None if reply is None else text(reply)
        return [text(e) for e in self._run("INFER.VRANDMEMBER", key, count, keyed=True)]

    def vrange(self, key: str, start: str = "-", end: str = "+", count: Optional[int] = None) -> List[str]:
        """Names in byte order: start/end are "-", "+", "[name" (inclusive) or "(name" (exclusive)."""
        args: List[Any] = ["INFER.VRANGE", key, start, end] + ([count] if count is not None else [])
        return [text(e) for e in self._run(*args, keyed=True)]

    def vlinks(self, key: str, element: str, with_scores: bool = False):
        """The element's neighbours per level (its highest level first, level 0 last, as Redis 8): names, or {name: score} with scores."""
        reply = self._run("INFER.VLINKS", key, element, *(["WITHSCORES"] if with_scores else []), keyed=True)
        if reply is None:
            return None
        if not with_scores:
            return [[text(n) for n in level] for level in reply]
        return [{text(k): float(v) for k, v in (level.items() if isinstance(level, dict) else zip(level[::2], level[1::2]))}
                for level in reply]

    def vinfo(self, key: str) -> Dict[str, Any]:
        return {k: (text(v) if isinstance(v, bytes) else v) for k, v in as_map(self._run("INFER.VINFO", key, keyed=True)).items()}

    # -- models and stats
    def models(self) -> List[str]:
        return sorted(text(m) for m in self._run("INFER.MODELS"))

    def info(self, model: str) -> Dict[str, Any]:
        return {k: (text(v) if isinstance(v, bytes) else v) for k, v in as_map(self._run("INFER.INFO", model)).items()}

    def stats(self, model: Optional[str] = None) -> Dict[str, Any]:
        return as_map(self._run("INFER.STATS", *([model] if model else [])))

    def load(self, name: str, path: str, **options) -> None:
        """INFER.LOAD name path [THREADS n] [QUEUE n] [MAX-RUNNING n] [CONTEXT n] [WEIGHTS copy|mmap] ...:
        keyword arguments by the option's name in lower case (max_running=4, weights="mmap")."""
        args: List[Any] = ["INFER.LOAD", name, path]
        for k, v in options.items():
            args += [k.upper().replace("_", "-"), v]
        self._run(*args)

    def unload(self, name: str) -> None:
        self._run("INFER.UNLOAD", name)
