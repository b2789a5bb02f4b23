"""Test doubles for plugin authors: one scripted generator, one tiny stack, and the one way a
test builds a pipeline (``pipeline_under_test``) or a target around it (``target_under_test``).

A scripted generator answers from a script instead of a model, so the logic around generation
(the pipeline, the defenses' hooks, an attack's bookkeeping, the cache) can be tested in
milliseconds. It is never a default and never what a feature test proves: the real stack is the
packaged LLM behind ``ragleak.stack.Stack``.

``tiny_stack`` is a real ``Stack`` (MiniLM embedder, FAISS index, generation cache, per-role
counters) whose generators of every role are scripted::

    stack = tiny_stack(target=copy_context, attacker=["1. a continuation"])
    target = build_target(stack, stack.index(documents))  # ragleak.pipeline.build_target

``pipeline_under_test`` builds the real ``RAGPipeline`` over a given index and generator, where a
test sets top_k, a defense or a seed itself instead of taking a stack's config::

    pipeline = pipeline_under_test(index, copy_context, defense, top_k=2, seed=1)
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Mapping, Sequence, Union

import numpy as np

from ragleak.config import StackConfig
from ragleak.context import RunContext
from ragleak.defenses.base import Defense
from ragleak.errors import ConfigError, RagleakError
from ragleak.pipeline.rag import AuditPolicy, RAGPipeline
from ragleak.pipeline.target import PipelineTarget
from ragleak.rag.cache import CachedGenerator
from ragleak.rag.generator import DecodingParams, Generation, GenerationResult, Generator
from ragleak.rag.index import PassageIndex
from ragleak.rag.prompt import ChatMessage, render_chatml
from ragleak.stack import ROLES, Role, Stack

#: A script: one reply for every call, a function of the last message (the user turn being
#: answered), a list of replies given in order, or a mapping from a keyword to the reply (a string
#: or a function of the rendered prompt) for the first keyword the rendered prompt contains.
Script = Union[str, Callable[[str], str], Sequence[str], Mapping[str, Union[str, Callable[[str], str]]]]


def last_user(messages: Sequence[ChatMessage]) -> str:
    """The content of the last message (the user turn the model answers)."""
    return messages[-1].content if messages else ""


def copy_context(user: str) -> str:
    """Answers with the context block of a RAG prompt's user turn, verbatim (a maximal leaker);
    "I don't know." when the prompt has no context."""
    if "Context:\n" not in user:
        return "I don't know."
    return user.split("Context:\n", 1)[1].split("\n\nQuestion:", 1)[0]


def echo(user: str) -> str:
    """Answers with the tail of the user message."""
    return f"echo: {user[-40:]}"


def prompt_words_likelihood(prompt: str, text: str) -> list[tuple[str, float]]:
    """A stand-in for a model's ``continuation_logprobs``: each word of ``text`` is one token,
    likely (log p = -0.1) when the prompt holds it and unlikely (-9, under 1%) otherwise: a
    scripted model that knows only what it was told."""
    told = {w.strip(".,:;!?\"'()").lower() for w in prompt.split()}
    return [(w, -0.1 if w.strip(".,:;!?\"'()").lower() in told else -9.0) for w in text.split()]


class ScriptedGenerator:
    """A ``Generator`` whose replies come from ``script`` instead of a model.

    ``calls`` counts generations and ``prompts`` keeps every rendered prompt, so a test can check
    what reached the model. ``generate_many`` answers a batch prompt by prompt and records its size in ``batches``.
    A list script raises ``RagleakError`` once it runs out, so a test
    that makes more calls than it scripted fails instead of reading a made-up reply.
    ``logprobs`` (a function of the rendered prompt) serves ``next_token_logprobs``; without it
    that call raises, since a script has no vocabulary. ``continuation`` ((prompt, text) -> [(piece,
    log p)]) serves ``continuation_logprobs``; without it the generator has no such method, as
    a model that cannot score a text. With ``reflect_params`` a reply made
    under decoding settings other than the ones the generator was built with says so (as a
    sampler's output would differ), so a test can see a defense change the settings, whether
    through ``params=`` or by setting ``generator.params``.
    """

    def __init__(self, script: Script = echo, model_id: str = "scripted", params: DecodingParams | None = None,
                 logprobs: Callable[[str], np.ndarray] | None = None, reflect_params: bool = False,
                 continuation: Callable[[str, str], list[tuple[str, float]]] | None = None) -> None:
        self.script = script
        self.model_id = model_id
        self.params = params or DecodingParams()
        self.built_params = self.params
        self.reflect_params = reflect_params
        self.logprobs = logprobs
        if continuation is not None:
            self.continuation_logprobs = continuation
        self.calls = 0
        self.prompts: list[str] = []
        self.batches: list[int] = []  # the size of each generate_many call

    def render(self, messages: Sequence[ChatMessage]) -> str:
        return render_chatml(messages)

    def generate(self, messages: Sequence[ChatMessage], params: DecodingParams | None = None) -> Generation:
        prompt = self.render(messages)
        self.calls += 1
        self.prompts.append(prompt)
        text = self._reply(messages, prompt)
        used = params or self.params
        if self.reflect_params and used != self.built_params:
            text += f" [sampled at temperature={used.temperature:g}, seed={used.seed}]"
        return Generation(text=text, prompt_tokens=len(prompt.split()), completion_tokens=len(text.split()),
                          finish_reason="stop", seconds=0.0)

    def generate_many(self, batch: Sequence[Sequence[ChatMessage]],
                      params: DecodingParams | None = None) -> list[GenerationResult]:
        """``generate`` for each prompt, as one batch (``batches`` records its size); a prompt whose
        script raises ``RagleakError`` gets that error as its entry, as a real batch does."""
        self.batches.append(len(batch))
        out: list[GenerationResult] = []
        for messages in batch:
            try:
                out.append(self.generate(messages, params))
            except RagleakError as exc:
                out.append(exc)
        return out

    def _reply(self, messages: Sequence[ChatMessage], prompt: str) -> str:
        script = self.script
        if callable(script):
            return script(last_user(messages))
        if isinstance(script, Mapping):
            reply = next((v for k, v in script.items() if k in prompt), "")
            return reply(prompt) if callable(reply) else reply
        if isinstance(script, str):
            return script
        if self.calls > len(script):
            raise RagleakError(f"scripted generator ran out of replies after {len(script)} calls")
        return script[self.calls - 1]

    def next_token_logprobs(self, prompt: str) -> np.ndarray:
        if self.logprobs is None:
            raise RagleakError("a scripted generator has no next-token log-probabilities unless given `logprobs`")
        return self.logprobs(prompt)


class ScriptedStack(Stack):
    """A ``Stack`` whose generators are scripted; the embedder, indexes, NLI model, cache and
    per-role counters are the real ones. One scripted generator per (role, model), wrapped in a
    ``CachedGenerator`` over the stack's cache like a real one."""

    def __init__(self, config: StackConfig | None = None, cache_path: Path | None = None,
                 scripts: Mapping[str, Script] | None = None) -> None:
        super().__init__(config, cache_path)
        unknown = set(scripts or {}) - set(ROLES)
        if unknown:
            raise ConfigError(f"unknown generator roles {sorted(unknown)}; known: {', '.join(ROLES)}")
        self.scripts = dict(scripts or {})
        self.scripted: dict[tuple[str, str], ScriptedGenerator] = {}

    def generator(self, role: Role = "target", model: str | None = None) -> CachedGenerator:
        if role not in ROLES:
            raise ConfigError(f"unknown generator role {role!r}; known: {', '.join(ROLES)}")
        model = model or self.config.model
        if (role, model) not in self._generators:
            # the model id names role and model: two roles' scripts never share cache entries
            script = self.scripts.get(role, echo)
            inner = script if isinstance(script, ScriptedGenerator) else ScriptedGenerator(
                script, model_id=f"scripted:{role}:{model}", params=self.config.decoding)
            self.scripted[(role, model)] = inner
            self._generators[(role, model)] = CachedGenerator(inner, self.cache())
        return self._generators[(role, model)]


def tiny_stack(cache_path: Path | None = None, config: StackConfig | None = None, **scripts: Script) -> ScriptedStack:
    """A real stack with scripted generators: ``target=``, ``attacker=``, ``standard=`` give each
    role's script or an already-built ``ScriptedGenerator`` (default: ``echo``). Without ``cache_path`` generations are not cached (every
    call counts as a model call), so a test never writes outside its own directory."""
    config = config or StackConfig(n_threads=1, top_k=3, candidate_k=6)
    if cache_path is None:
        config = config.model_copy(update={"use_cache": False})
    return ScriptedStack(config, cache_path, scripts)


def pipeline_under_test(index: PassageIndex, generator: Generator | Script, defense: Defense | None = None, *,
                        top_k: int | None = None, candidate_k: int | None = None, seed: int | None = None,
                        audit: AuditPolicy | None = None) -> RAGPipeline:
    """The real ``RAGPipeline`` over ``index`` (a ``PassageIndex``, or any object with ``passages``
    and ``search(query, k)``) and ``generator``: a generator used as given (the real one from a
    stack, a ``CachedGenerator``, a ``ScriptedGenerator`` the test inspects), or a ``Script``, which
    gets a ``ScriptedGenerator`` of its own. ``seed`` is the run context's seed (a defense's
    noise is seeded with it, 0 when left out); ``top_k``, ``candidate_k`` and ``audit`` left out
    take the pipeline's own defaults."""
    if not hasattr(generator, "generate"):  # a script: a string, function, list or mapping
        generator = ScriptedGenerator(generator)
    # a test is an audit: its DP noise is seeded (0 unless given), never the deployed default's fresh entropy
    options: dict = {"top_k": top_k, "candidate_k": candidate_k, "audit": audit,
                     "ctx": RunContext(seed=0 if seed is None else seed)}
    return RAGPipeline(index, generator, defense, **{k: v for k, v in options.items() if v is not None})


def target_under_test(index: PassageIndex, generator: Generator | Script, defense: Defense | None = None, *,
                      principal: str | None = None, top_k: int | None = None, candidate_k: int | None = None,
                      seed: int | None = None, audit: AuditPolicy | None = None) -> PipelineTarget:
    """``pipeline_under_test``'s pipeline as the ``PipelineTarget`` an attack queries
    (``principal``: the client id it tells the defense)."""
    pipeline = pipeline_under_test(index, generator, defense, top_k=top_k, candidate_k=candidate_k, seed=seed,
                                   audit=audit)
    return PipelineTarget(pipeline, principal=principal)
