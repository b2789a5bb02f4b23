"""The generation cache: exact keys, persistence, and several processes writing at once."""

from __future__ import annotations

import multiprocessing as mp

from ragleak.rag.cache import CachedGenerator, GenerationCache, batched_cache_key, cache_key
from ragleak.rag.generator import DecodingParams
from ragleak.rag.prompt import ChatMessage
from ragleak.testing import ScriptedGenerator


def counting_generator():
    """Answers with the user message reversed; ``calls`` counts real (uncached) generations."""
    return ScriptedGenerator(_reverse, model_id="scripted-model")


def _reverse(user):
    return user[::-1]


def _msgs(text):
    return [ChatMessage(role="user", content=text)]


def test_key_depends_on_model_params_and_exact_prompt():
    p = DecodingParams()
    base = cache_key("m", p, "prompt")
    assert cache_key("m", p, "prompt") == base
    assert cache_key("m2", p, "prompt") != base
    assert cache_key("m", DecodingParams(max_tokens=7), "prompt") != base
    assert cache_key("m", p, "prompt ") != base


def test_greedy_keys_ignore_the_seed_and_sampled_keys_do_not():
    # greedy decoding draws nothing, so an agent's per-call seeds must not split its cache entries
    greedy = [cache_key("m", DecodingParams(seed=s), "prompt") for s in (0, 1, 10_007)]
    assert len(set(greedy)) == 1
    assert batched_cache_key("m", DecodingParams(seed=3, batch=2), "a", ["a", "b"]) == \
        batched_cache_key("m", DecodingParams(seed=0, batch=2), "a", ["a", "b"])
    sampled = {cache_key("m", DecodingParams(temperature=0.7, top_k=40, seed=s), "prompt") for s in (0, 1)}
    assert len(sampled) == 2


def test_an_agents_reseeded_greedy_repeat_is_a_hit(tmp_path):
    inner = counting_generator()
    gen = CachedGenerator(inner, GenerationCache(tmp_path / "c.sqlite"))
    first = gen.generate(_msgs("hello"), DecodingParams(seed=11))
    again = gen.generate(_msgs("hello"), DecodingParams(seed=12))
    assert inner.calls == 1 and again.cached and again.text == first.text


def test_repeats_count_only_hits_on_prompts_this_wrapper_sent_before(tmp_path):
    path = tmp_path / "c.sqlite"
    earlier = CachedGenerator(counting_generator(), GenerationCache(path))
    earlier.generate(_msgs("from another cell"))
    gen = CachedGenerator(counting_generator(), GenerationCache(path))
    gen.generate(_msgs("from another cell"))  # a hit, but this wrapper's first sending of it
    gen.generate(_msgs("new"))
    gen.generate(_msgs("new"))
    gen.generate(_msgs("from another cell"))
    assert (gen.misses, gen.hits, gen.repeats) == (1, 3, 2)


def test_hit_does_not_run_the_model_and_persists(tmp_path):
    path = tmp_path / "c.sqlite"
    inner = counting_generator()
    gen = CachedGenerator(inner, GenerationCache(path))
    first = gen.generate(_msgs("hello"))
    second = gen.generate(_msgs("hello"))
    assert inner.calls == 1 and second.cached and not first.cached and second.text == first.text
    reopened = CachedGenerator(counting_generator(), GenerationCache(path))
    assert reopened.generate(_msgs("hello")).text == "olleh" and reopened.inner.calls == 0


def _worker(path, worker, n, queue):
    inner = counting_generator()
    gen = CachedGenerator(inner, GenerationCache(path))
    texts = [gen.generate(_msgs(f"prompt {i}")).text for i in range(n)]
    queue.put((worker, inner.calls, texts))


def test_several_processes_share_one_cache(tmp_path):
    path = tmp_path / "shared.sqlite"
    GenerationCache(path)
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(path, w, 40, queue)) for w in range(3)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    expected = [f"prompt {i}"[::-1] for i in range(40)]
    assert all(texts == expected for _, _, texts in results)
    assert len(GenerationCache(path)) == 40
    # every prompt was computed exactly once: a process reaching a prompt another is generating
    # waits for it (the cache's in-progress claim) instead of running the model again
    assert sum(calls for _, calls, _ in results) == 40


def _open_and_write(path, worker, queue):
    gen = CachedGenerator(counting_generator(), GenerationCache(path))
    queue.put((worker, gen.generate(_msgs(f"worker {worker}")).text))


def test_processes_creating_a_new_cache_at_once_do_not_collide(tmp_path):
    path = tmp_path / "fresh.sqlite"  # nobody creates it first: every process races to set it up
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_open_and_write, args=(path, w, queue)) for w in range(4)]
    for p in procs:
        p.start()
    results = dict(queue.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert results == {w: f"worker {w}"[::-1] for w in range(4)}
    assert len(GenerationCache(path)) == 4


def test_likelihoods_are_cached_and_offered_only_when_the_model_scores_text(tmp_path):
    from ragleak.testing import prompt_words_likelihood

    scored = []

    def likelihood(prompt, text):
        scored.append(text)
        return prompt_words_likelihood(prompt, text)

    cached = CachedGenerator(ScriptedGenerator("x", continuation=likelihood), GenerationCache(tmp_path / "c.sqlite"))
    first = cached.continuation_logprobs("the prompt", "the Quorvash ledger")
    assert first == [("the", -0.1), ("Quorvash", -9.0), ("ledger", -9.0)] and cached.misses == 1
    again = CachedGenerator(ScriptedGenerator("x", continuation=likelihood), GenerationCache(tmp_path / "c.sqlite"))
    assert again.continuation_logprobs("the prompt", "the Quorvash ledger") == first and again.hits == 1
    assert scored == ["the Quorvash ledger"]  # the second process read it, the model did not run
    assert again.continuation_logprobs("another prompt", "the Quorvash ledger") != [] and again.misses == 1
    plain = CachedGenerator(ScriptedGenerator("x"), GenerationCache(tmp_path / "c.sqlite"))
    assert getattr(plain, "continuation_logprobs", None) is None  # a model that cannot score offers nothing


def test_model_seconds_count_the_time_inside_the_model_on_misses_only(tmp_path):
    import time

    def slow(user):
        time.sleep(0.02)
        return user[::-1]

    gen = CachedGenerator(ScriptedGenerator(slow, model_id="slow-model"), GenerationCache(tmp_path / "c.sqlite"))
    gen.generate(_msgs("hello"))
    after_miss = gen.model_seconds
    gen.generate(_msgs("hello"))  # a hit: no model time
    assert after_miss >= 0.02 and gen.model_seconds == after_miss
    uncached = CachedGenerator(ScriptedGenerator(slow, model_id="slow-model"), None)
    uncached.generate(_msgs("hi"))
    assert uncached.model_seconds >= 0.02
