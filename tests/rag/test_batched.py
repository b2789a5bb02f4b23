"""Batched generation's plumbing with scripted generators: the cache serves hits and batches only
the misses, one prompt's failure stays its own, every hook runs per query as in ``answer``, and an
attack's transcript is the one it makes one query at a time. The real model's exactness is
checked in test_batched_model.py."""

from __future__ import annotations

import pytest

from ragleak.attacks import make_attack
from ragleak.attacks.base import QuerySession
from ragleak.config import StackConfig
from ragleak.defenses import Defense
from ragleak.errors import RagleakError
from ragleak.pipeline.build import build_target
from ragleak.pipeline.target import CallableTarget, PipelineTarget
from ragleak.rag.cache import CachedGenerator, GenerationCache, batched_cache_key, cache_key
from ragleak.rag.completion import CompletionText
from ragleak.rag.generator import DecodingParams, Generation
from ragleak.rag.prompt import ChatMessage
from ragleak.records import Document, digest
from ragleak.testing import ScriptedGenerator, pipeline_under_test, tiny_stack


def _msgs(text):
    return [ChatMessage(role="user", content=text)]


def _reverse(user):
    if "poison" in user:
        raise RagleakError(f"prompt too long: {user}")
    return user[::-1]


# -- the decoding settings ---------------------------------------------------------------------

def test_unbatched_settings_serialise_as_before_and_batch_enters_every_key():
    before = {"max_tokens": 256, "temperature": 0.0, "top_k": 1, "top_p": 1.0, "repeat_penalty": 1.0, "seed": 0}
    assert DecodingParams().model_dump(mode="json") == before
    assert cache_key("m", DecodingParams(), "p") == digest({"model": "m", "params": before, "prompt": "p"})
    assert cache_key("m", DecodingParams(batch=8), "p") != cache_key("m", DecodingParams(), "p")
    assert DecodingParams.model_validate_json(DecodingParams(batch=8).model_dump_json()).batch == 8
    batched = StackConfig(decoding=DecodingParams(batch=8))
    assert digest(batched) != digest(StackConfig()) and "batch" not in str(StackConfig().model_dump(mode="json"))


# -- CachedGenerator.generate_many -------------------------------------------------------------

B4 = DecodingParams(batch=4)


def test_unbatched_settings_generate_one_by_one_with_the_usual_keys_and_counters(tmp_path):
    prompts = [_msgs(t) for t in ["a", "b", "a", "c", "poison", "d"]]
    one = CachedGenerator(ScriptedGenerator(_reverse, model_id="m"), GenerationCache(tmp_path / "1.sqlite"))
    inner = ScriptedGenerator(_reverse, model_id="m")
    many = CachedGenerator(inner, GenerationCache(tmp_path / "2.sqlite"))
    texts = []
    for p in prompts:
        try:
            texts.append(one.generate(p).text)
        except RagleakError as exc:
            texts.append(type(exc))
    out = many.generate_many(prompts)
    assert [o.text if isinstance(o, Generation) else type(o) for o in out] == texts
    assert (many.hits, many.misses) == (one.hits, one.misses) == (1, 5) and inner.batches == []
    assert many.cached(_msgs("c")) is not None  # stored under the one-at-a-time key


def test_a_batch_is_cached_whole_and_keyed_by_its_composition(tmp_path):
    inner = ScriptedGenerator(_reverse, model_id="m", params=B4)
    gen = CachedGenerator(inner, GenerationCache(tmp_path / "c.sqlite"))
    batch = [_msgs("one"), _msgs("two"), _msgs("three")]
    first = gen.generate_many(batch)
    assert [g.text for g in first] == ["eno", "owt", "eerht"] and not any(g.cached for g in first)
    again = gen.generate_many(batch)
    assert [g.text for g in again] == ["eno", "owt", "eerht"] and all(g.cached for g in again)
    assert inner.batches == [3] and (gen.hits, gen.misses) == (3, 3)
    # the same prompt in another batch is another key (its text may depend on its neighbours),
    # and a batch with any miss is decoded whole, never only its misses
    gen.generate_many([_msgs("one"), _msgs("two"), _msgs("four")])
    assert inner.batches == [3, 3] and gen.misses == 6
    assert gen.cached(_msgs("one")) is None  # nothing under the one-at-a-time key
    assert batched_cache_key("m", B4, "p", ["p", "q"]) != batched_cache_key("m", B4, "p", ["p", "r"])


def test_a_failing_prompt_fails_alone_and_is_never_cached(tmp_path):
    inner = ScriptedGenerator(_reverse, model_id="m", params=B4)
    gen = CachedGenerator(inner, GenerationCache(tmp_path / "c.sqlite"))
    batch = [_msgs("fine"), _msgs("poison pill"), _msgs("also fine")]
    out = gen.generate_many(batch)
    assert isinstance(out[1], RagleakError) and "poison" in str(out[1])
    assert [out[0].text, out[2].text] == ["enif", "enif osla"]
    assert len(gen.cache) == 2
    retry = gen.generate_many(batch)
    assert isinstance(retry[1], RagleakError) and inner.batches == [3, 3]  # tried again, not served


def test_a_batch_that_fails_as_a_whole_fails_each_prompt(tmp_path):
    class Broken(ScriptedGenerator):
        def generate_many(self, batch, params=None):
            raise RagleakError("llama_decode failed (context full?)")

    gen = CachedGenerator(Broken(model_id="m", params=B4), None)
    out = gen.generate_many([_msgs("a"), _msgs("b")])
    assert all(isinstance(o, RagleakError) for o in out) and gen.misses == 2


def test_an_inner_generator_without_generate_many_goes_one_by_one(tmp_path):
    class Plain:
        model_id, params = "plain", DecodingParams()

        def __init__(self):
            self.calls = 0

        def render(self, messages):
            return messages[-1].content

        def generate(self, messages, params=None):
            self.calls += 1
            if "poison" in messages[-1].content:
                raise RagleakError("no")
            return Generation(text=messages[-1].content.upper(), prompt_tokens=1, completion_tokens=1,
                              finish_reason="stop", seconds=0.0)

    inner = Plain()
    out = CachedGenerator(inner, None).generate_many([_msgs("x"), _msgs("poison"), _msgs("y")], B4)
    assert out[0].text == "X" and isinstance(out[1], RagleakError) and out[2].text == "Y" and inner.calls == 3


# -- RAGPipeline.answer_many -------------------------------------------------------------------

class CountingPostprocess(Defense):
    """Postprocess only (batchable): counts its calls and tags each answer with its query."""

    name = "test-counting-post"
    hooks = frozenset({"postprocess"})

    def __init__(self):
        super().__init__()
        self.seen: list[str] = []

    def postprocess(self, query, answer, passages):
        self.seen.append(query)
        return f"{answer} <{len(self.seen)}>"


class PerQueryState(Defense):
    """Keeps per-query state in begin_query: batching would reorder its hooks, so it is refused."""

    name = "test-per-query"
    hooks = frozenset({"postprocess"})

    def begin_query(self, index, history, principal=None):
        self.current = principal

    def postprocess(self, query, answer, passages):
        return answer


QUERIES = ["When does the garden open?", "How long is the ferry?", "Who founded the foundry?",
           "Where are the servo motors?", "What is in room B-17?"]


def _pipeline(fact_index, defense=None, batch=4, script=None):
    gen = ScriptedGenerator(script or (lambda user: f"answer to {user[-30:]}"), model_id="m",
                            params=DecodingParams(batch=batch))
    return pipeline_under_test(fact_index, CachedGenerator(gen, None), defense, top_k=2), gen


def _strip_timings(trace):
    return trace.model_copy(update={"timings": {}, "hooks": [h.model_copy(update={"seconds": 0.0}) for h in trace.hooks]})


def test_answer_many_equals_answer_query_by_query(fact_index):
    batched, gen = _pipeline(fact_index, CountingPostprocess())
    single, _ = _pipeline(fact_index, CountingPostprocess(), batch=1)
    many = batched.answer_many(QUERIES)
    ones = [single.answer(q) for q in QUERIES]
    assert gen.batches == [4, 1] and batched.batch_size() == 4
    assert [r.answer for r in many] == [r.answer for r in ones]
    assert [_strip_timings(r.trace) for r in many] == [_strip_timings(r.trace) for r in ones]
    assert batched.defense.seen == QUERIES  # postprocess ran once per query, in order


def test_defenses_whose_hooks_batching_would_reorder_go_one_by_one(fact_index):
    class NoiseBoth(Defense):
        name = "test-noise-both"
        hooks = frozenset({"rewrite_context", "postprocess"})

        def rewrite_context(self, query, passages):
            return passages

        def postprocess(self, query, answer, passages):
            return answer

    class OwnGenerate(Defense):
        name = "test-own-generate"
        hooks = frozenset({"generate"})

        def generate(self, messages, passages, generator):
            return generator.generate(messages).text

    for defense in (PerQueryState(), NoiseBoth(), OwnGenerate()):
        pipe, gen = _pipeline(fact_index, defense)
        assert pipe.batch_size() == 1
        out = pipe.answer_many(QUERIES[:3])
        assert len(out) == 3 and gen.batches == [], defense.name
    assert _pipeline(fact_index, None, batch=1)[0].batch_size() == 1


def test_unbatched_answer_many_puts_off_a_prompt_another_worker_is_generating(fact_index, tmp_path):
    single, _ = _pipeline(fact_index, CountingPostprocess(), batch=1)
    ones = [single.answer(q) for q in QUERIES]
    # another worker (another claim owner on the same cache file) is generating query 1's prompt;
    # it stores its answer only once this worker has generated every other prompt
    other = GenerationCache(tmp_path / "c.sqlite")
    key = cache_key("m", DecodingParams(), ones[1].trace.prompt)
    claim = other.claim(key)

    def script(user):
        if user.endswith(QUERIES[4]):
            other.put(key, "m", DecodingParams(), ones[1].trace.prompt,
                      Generation(text="theirs", prompt_tokens=1, completion_tokens=1, finish_reason="stop", seconds=0.0))
            other.release(claim)
        return f"answer to {user[-30:]}"

    gen = ScriptedGenerator(script, model_id="m")
    pipe = pipeline_under_test(fact_index, CachedGenerator(gen, GenerationCache(tmp_path / "c.sqlite")),
                               CountingPostprocess(), top_k=2)
    assert PipelineTarget(pipe).takes_many and not PipelineTarget(single).takes_many  # no shared cache
    many = pipe.answer_many(QUERIES)
    assert gen.prompts == [ones[i].trace.prompt for i in (0, 2, 3, 4)]  # query 1 never reached this model
    assert many[1].answer == "theirs <2>" and many[1].trace.cache_hit
    assert pipe.defense.seen == QUERIES  # postprocess in query order, the put-off query in its place
    for i in (0, 2, 3, 4):
        assert _strip_timings(many[i].trace) == _strip_timings(ones[i].trace)
    assert other.read(key)[0].text == "theirs"


def test_unbatched_answer_many_keeps_a_query_failure_its_own_and_an_unreadable_cache_fails_the_call(
        fact_index, tmp_path, monkeypatch):
    from ragleak.errors import CacheCorruptError

    def script(user):
        if "ferry" in user:
            raise RagleakError("prompt has 5000 tokens but the model context is 4096")
        return "fine"

    gen = CachedGenerator(ScriptedGenerator(script, model_id="m"), GenerationCache(tmp_path / "c.sqlite"))
    pipe = pipeline_under_test(fact_index, gen, top_k=2)
    out = pipe.answer_many(QUERIES[:3])
    assert isinstance(out[1], RagleakError) and out[0].answer == out[2].answer == "fine"
    monkeypatch.setattr(gen, "_read", lambda key: (_ for _ in ()).throw(CacheCorruptError("unreadable")))
    with pytest.raises(CacheCorruptError):
        pipe.answer_many(QUERIES[3:])


def test_one_failing_query_fails_alone(fact_index):
    def script(user):
        if "ferry" in user:
            raise RagleakError("prompt has 5000 tokens but the model context is 4096")
        return "fine"

    pipe, gen = _pipeline(fact_index, script=script)
    out = pipe.answer_many(QUERIES[:3])
    assert isinstance(out[1], RagleakError) and "4096" in str(out[1])
    assert out[0].answer == out[2].answer == "fine" and gen.batches == [3]


# -- QuerySession.ask_many and the attacks -----------------------------------------------------

def test_ask_many_records_as_ask_would_and_keeps_failures_per_query(fact_index):
    def script(user):
        if "ferry" in user:
            raise RagleakError("too long")
        return f"ok {user[-12:]}"

    pipe, gen = _pipeline(fact_index, script=script)
    session = QuerySession(PipelineTarget(pipe), budget=4, seed=0)
    records = session.ask_many(QUERIES, [f"q:{i}" for i in range(5)])
    assert records[4] is None and [r.index for r in records[:4]] == [0, 1, 2, 3]
    assert records[1].outcome == "failed" and records[1].answer is None and "too long" in records[1].error
    assert all(r.outcome == "answered" for i, r in enumerate(records[:4]) if i != 1)
    assert gen.batches == [4] and session.remaining == 0

    one = QuerySession(PipelineTarget(_pipeline(fact_index, script=script, batch=1)[0]), budget=4, seed=0)
    ones = one.ask_many(QUERIES, [f"q:{i}" for i in range(5)])
    assert [(r.query, r.answer, r.error, r.retrieved_ids, r.phase) for r in ones[:4]] == \
           [(r.query, r.answer, r.error, r.retrieved_ids, r.phase) for r in records[:4]]


def test_ask_many_goes_one_by_one_where_the_target_cannot_batch():
    sent = []
    session = QuerySession(CallableTarget(lambda q: sent.append(q) or "a"), budget=2, seed=0)
    records = session.ask_many(["x", "y", "z"], ["p", "p", "p"])
    assert sent == ["x", "y"] and records[2] is None


def test_a_bug_in_the_target_still_raises():
    class Buggy:
        name, exposes_retrieved_ids, takes_many = "buggy", False, True

        def answer_many(self, queries):
            return [ZeroDivisionError("bug")] * len(queries)

    with pytest.raises(ZeroDivisionError):
        QuerySession(Buggy(), budget=3, seed=0).ask_many(["a", "b"], ["p", "p"])


def _attack_transcript(name, tmp_path, batch, view=None, documents=None):
    config = StackConfig(n_threads=1, top_k=2, candidate_k=4, decoding=DecodingParams(batch=batch))
    stack = tiny_stack(tmp_path / f"{name}-{batch}.sqlite", config, target=lambda user: f"Passage 1: {user[-60:]}")
    docs = documents or [Document(id=f"d{i}", text=f"Record {i}: Zorbel Quant{i} owes 4{i}11 dollars to Vexa.")
                         for i in range(8)]
    transcript = make_attack(name).run(build_target(stack, stack.index(docs)), stack.context(0), corpus_view=view)
    return transcript, stack.scripted[("target", config.model)]


@pytest.mark.parametrize("name", ["ps", "canary"])
def test_extraction_attacks_release_the_same_transcript_batched(name, tmp_path):
    batched, gen = _attack_transcript(name, tmp_path, batch=4)
    single, gen1 = _attack_transcript(name, tmp_path, batch=1)
    assert batched.release_digest() == single.release_digest() and batched.extracted == single.extracted
    assert gen.batches and max(gen.batches) == 4 and gen1.batches == []


def test_mi_scores_the_same_batched(tmp_path):
    docs = [Document(id=f"d{i}", text=f"Record {i}: Zorbel Quant{i} owes 4{i}11 dollars to Vexa Lintz{i}.")
            for i in range(8)]
    from ragleak.attacks import CorpusView

    view = CorpusView(documents=docs[:5], member_ids=["d1"])
    batched, gen = _attack_transcript("mi", tmp_path, 4, view, docs)
    single, _ = _attack_transcript("mi", tmp_path, 1, view, docs)
    assert batched.release_digest() == single.release_digest()
    assert batched.membership == single.membership and len(batched.membership) == 5
    assert sum(gen.batches) == 10


# -- the completion text -----------------------------------------------------------------------

def _text(tokens, max_tokens=10, pieces=None, bos=None):
    pieces = pieces or {}
    stopper = CompletionText(lambda t: pieces.get(t, f"<{t}>".encode()), lambda t: t == 0, max_tokens,
                             ["<|im_end|>", "END"], bos=bos)
    for t in tokens:
        if stopper.push(t):
            break
    return stopper


def test_completion_stops_at_the_end_token_a_stop_string_or_the_limit():
    s = _text([1, 2, 0, 3])
    assert (s.text, s.finish_reason, s.tokens) == ("<1><2>", "stop", [1, 2])
    s = _text([1, 5, 2], pieces={5: b" END here"})
    assert (s.text, s.finish_reason, s.tokens) == ("<1> ", "stop", [1, 5])
    s = _text([1, 2, 3, 4], max_tokens=3)
    assert (s.text, s.finish_reason, len(s.tokens)) == ("<1><2><3>", "length", 3)


def test_completion_runs_past_its_limit_inside_a_utf8_character():
    euro = "\u20ac".encode()  # three bytes, one token each: llama-cpp-python keeps going until it is whole
    s = _text([1, 7, 8, 9, 4], max_tokens=2, pieces={7: euro[:1], 8: euro[1:2], 9: euro[2:]})
    assert s.text == "<1>\u20ac" and s.finish_reason == "length" and len(s.tokens) == 4
    cut = _text([1, 7, 0], max_tokens=5, pieces={7: euro[:1]})
    assert cut.text == "<1>" and cut.finish_reason == "stop"  # an unfinished character is dropped


def test_completion_drops_the_leading_space_of_a_bos_start_only():
    assert _text([9, 1, 0], pieces={9: b" hi"}, bos=9).text == "hi<1>"
    assert _text([1, 9, 0], pieces={9: b" hi"}, bos=9).text == "<1> hi"


@pytest.mark.parametrize("params", [DecodingParams(), B4])
def test_an_unreadable_cache_fails_the_whole_call_not_one_query(tmp_path, monkeypatch, params):
    from ragleak.errors import CacheCorruptError

    gen = CachedGenerator(ScriptedGenerator(_reverse, model_id="m"), GenerationCache(tmp_path / "c.sqlite"))
    monkeypatch.setattr(gen, "_read", lambda key: (_ for _ in ()).throw(CacheCorruptError("unreadable")))
    with pytest.raises(CacheCorruptError):
        gen.generate_many([_msgs("a"), _msgs("b")], params)
