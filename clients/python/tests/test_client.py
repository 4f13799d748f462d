"""redis_infer.Infer against a real redis-server with the module (and a Redis Cluster of them)."""
import json
import math

import pytest
import redis

from redis_infer import BusyError, GenerateResult, Infer, InferError, UnknownModelError

PROMPT = "Once upon a time"


def test_generate_matches_the_command(r):
    ai = Infer(r)
    g = ai.generate("stories", PROMPT, max_tokens=12, temperature=0)
    assert isinstance(g, GenerateResult)
    assert g.text == r.execute_command("INFER.GENERATE", "stories", PROMPT, "MAXTOKENS", 12, "TEMP", 0).decode()
    assert g.finish == "length"
    assert g.generated_tokens == 12 and len(g.ids) == 12
    assert g.prompt_tokens > 0
    assert "decode_tps" in g.stats


def test_chat_with_a_built_in_template_and_a_schema(r):
    ai = Infer(r)
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8}}, "required": ["name"],
              "additionalProperties": False}
    g = ai.chat("stories", [{"role": "user", "content": "Name a cat"}], template="chatml", json_schema=schema,
                temperature=1, seed=4, max_tokens=40)
    assert isinstance(json.loads(g.text)["name"], str)
    assert g.finish == "stop"


def test_logprobs_are_typed(r):
    g = Infer(r).generate("stories", PROMPT, max_tokens=3, temperature=0, logprobs=2)
    assert len(g.logprobs) == 3
    for t in g.logprobs:
        assert t.logprob <= 0 and len(t.top_logprobs) == 2
        assert t.top_logprobs[0].id == t.id  # greedy: the token is its own first alternative


def test_stream_yields_the_same_text(r):
    ai = Infer(r)
    pieces = list(ai.stream("stories", PROMPT, max_tokens=40, temperature=0, stream_key="s:1"))
    assert len(pieces) >= 1
    assert "".join(pieces) == ai.generate("stories", PROMPT, max_tokens=40, temperature=0).text
    assert r.xrevrange("s:1", count=1)[0][1][b"finish"] == b"length"


def test_stream_raises_the_modules_error(r):
    with pytest.raises(InferError, match="MAXTOKENS"):
        list(Infer(r).stream("stories", PROMPT, max_tokens=0))


def test_tokens_in_keys_and_detokenize(r):
    ai = Infer(r)
    ids = ai.tokenize("stories", PROMPT)
    assert ai.store_tokens("stories", PROMPT, "doc:1") == len(ids)
    assert ai.detokenize("stories", ids).strip() == PROMPT
    assert ai.detokenize("stories", key="doc:1").strip() == PROMPT
    assert ai.generate("stories", tokens=["doc:1"], max_tokens=8, temperature=0).text == \
        ai.generate("stories", PROMPT, max_tokens=8, temperature=0).text


def test_embeddings_and_vector_sets(r):
    ai = Infer(r)
    v = ai.embed("stories", "a little girl", normalize=True)
    assert abs(math.sqrt(sum(x * x for x in v)) - 1) < 1e-4
    assert ai.embed_store("stories", "a little girl", "kb", "doc:a", attributes={"doc": "d:a", "n": 1})
    assert ai.embed_store("stories", "a big dog", "kb", "doc:b", attributes={"doc": "d:b", "n": 2})
    assert ai.vcard("kb") == 2 and ai.vdim("kb") == len(v)
    hits = ai.vsim("kb", v, count=2, with_attributes=True)
    assert hits[0].element == "doc:a" and hits[0].score > hits[1].score
    assert json.loads(hits[0].attributes)["n"] == 1
    assert [h.element for h in ai.vsim("kb", element="doc:b", filter=".n == 2")] == ["doc:b"]
    assert ai.vgetattr("kb", "doc:b") == {"doc": "d:b", "n": 2}
    assert ai.vsetattr("kb", "doc:b", {"n": 3}) and ai.vgetattr("kb", "doc:b") == {"n": 3}
    assert len(ai.vemb("kb", "doc:a")) == len(v)
    assert ai.vinfo("kb")
    assert ai.vadd("kb", [0.0] * (len(v) - 1) + [1.0], "doc:c")
    assert ai.vrem("kb", "doc:c") and not ai.vrem("kb", "doc:c")


def test_rag_in_one_call(r):
    ai = Infer(r)
    ai.store_tokens("stories", "Lily had a red ball.", "d:1")
    ai.embed_store("stories", "Lily had a red ball.", "kb2", "e1", attributes={"doc": "d:1"})
    g = ai.rag("stories", "kb2", "What did Lily have?", dockey="doc", count=1, max_tokens=8, temperature=0)
    assert g.generated_tokens == 8
    assert [(s.element, s.key, s.status) for s in g.sources] == [("e1", "d:1", "used")]


def test_models_info_stats(r):
    ai = Infer(r)
    assert ai.models() == ["stories"]
    assert ai.info("stories")["name"] == "stories"
    assert "completed" in ai.stats("stories")


def test_module_errors_are_exceptions_with_its_message(r):
    ai = Infer(r)
    with pytest.raises(UnknownModelError, match="nope"):
        ai.generate("nope", PROMPT)
    with pytest.raises(InferError, match="TOPP"):
        ai.generate("stories", PROMPT, top_p=7)
    assert issubclass(BusyError, InferError)


def test_cluster_routes_keyless_and_keyed_commands(cluster):
    ai = Infer(cluster)
    assert ai.models() == ["stories"]
    g = ai.generate("stories", PROMPT, max_tokens=6, temperature=0)
    assert g.generated_tokens == 6
    # Keys on every node: token blobs, generations from them, streams and vector sets.
    for i in range(6):
        key = "doc:%d" % i
        ai.store_tokens("stories", PROMPT, key)
        assert ai.generate("stories", tokens=[key], max_tokens=6, temperature=0).text == g.text
        assert "".join(ai.stream("stories", PROMPT, max_tokens=6, temperature=0, stream_key="s:%d" % i)) == g.text
        assert ai.embed_store("stories", "text %d" % i, "kb:%d" % i, "e")
        assert ai.vcard("kb:%d" % i) == 1


def test_semantic_cache(r):
    ai = Infer(r)
    cache = {"key": "py:cache", "threshold": 0.99, "ttl": 600}
    miss = ai.generate("stories", PROMPT, max_tokens=10, temperature=0, cache=cache)
    hit = ai.generate("stories", PROMPT, max_tokens=10, temperature=0, cache=cache)
    assert miss.stats["cached"] == 0 and hit.stats["cached"] == 1
    assert hit.text == miss.text
    assert ai.vcard("py:cache") == 1


def test_vector_set_iteration_and_links(r):
    ai = Infer(r)
    for i, name in enumerate(["b", "a", "c", "d"]):
        ai.vadd("it", [1.0, float(i)], name)
    assert ai.vismember("it", "a") and not ai.vismember("it", "z")
    assert ai.vrange("it") == ["a", "b", "c", "d"]
    assert ai.vrange("it", "(a", "[c") == ["b", "c"]
    assert ai.vrandmember("it") in {"a", "b", "c", "d"}
    assert sorted(ai.vrandmember("it", 10)) == ["a", "b", "c", "d"]
    assert len(ai.vrandmember("it", -10)) == 10
    links = ai.vlinks("it", "a", with_scores=True)
    assert links and all(0 <= s <= 1 for s in links[0].values())
    assert ai.vlinks("it", "zz") is None


def test_resp3_shapes_parse_like_resp2():
    # Debian 12's redis-py (4.3) speaks RESP2 only; redis-py 5+ with protocol=3 hands maps over as dicts.
    # The same reply in both shapes gives the same result.
    from redis_infer.results import GenerateResult, RagResult
    resp2 = [b"text", b"hi", b"finish", b"length", b"prompt_tokens", 3, b"generated_tokens", 2, b"ids", [5, 6],
             b"tool_calls", [[b"id", b"call_1", b"type", b"function", b"name", b"f", b"arguments", b"{}"]],
             b"logprobs", [[b"id", 5, b"token", b"h", b"logprob", b"-0.5", b"top_logprobs", []]]]
    resp3 = {b"text": b"hi", b"finish": b"length", b"prompt_tokens": 3, b"generated_tokens": 2, b"ids": [5, 6],
             b"tool_calls": [{b"id": b"call_1", b"type": b"function", b"name": b"f", b"arguments": b"{}"}],
             b"logprobs": [{b"id": 5, b"token": b"h", b"logprob": -0.5, b"top_logprobs": []}]}
    a, b = GenerateResult.parse(resp2), GenerateResult.parse(resp3)
    assert (a.text, a.finish, a.ids, a.tool_calls, a.logprobs) == (b.text, b.finish, b.ids, b.tool_calls, b.logprobs)
    assert a.tool_calls[0].name == "f" and a.logprobs[0].logprob == -0.5
    rag = RagResult.parse({b"text": b"x", b"sources": [[b"e1", 0.9, b"d:1", b"used"]]})
    assert rag.sources[0].key == "d:1"
