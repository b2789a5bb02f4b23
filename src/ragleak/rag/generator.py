"""Generators: the local GGUF LLM run by llama.cpp, behind a small protocol.

A generator turns chat messages into text with fixed decoding parameters, and exposes the
next-token log-probabilities for a prompt (DP token-voting defenses aggregate them). The
default decoding is greedy, so the same prompt always gives the same text; that is what makes
the generation cache (``rag/cache.py``) sound.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Protocol, Sequence, Union, runtime_checkable

import numpy as np
from pydantic import Field, model_serializer

from ragleak.errors import ModelNotInstalledError, RagleakError
from ragleak.rag.completion import CompletionText
from ragleak.rag.models import ModelSpec, get_spec, model_path
from ragleak.rag.multiseq import LlamaMultiSequence
from ragleak.rag.prompt import ChatMessage, message_ends, render_chatml
from ragleak.records import Record

log = logging.getLogger(__name__)


class DecodingParams(Record):
    """Sampling settings. temperature 0 means greedy (argmax) decoding.

    ``batch`` > 1 is the batched-generation mode: a cell's independent single-turn queries (the PS
    pool, MI probes, canary queries) are decoded up to ``batch`` at a time in one llama.cpp
    context (``LlamaCppGenerator.generate_many``). It is part of the settings, so of every cache
    key and cell id, whatever its measured exactness: batched and one-at-a-time results never
    mix in one cache or report. At the default 1 it is left out of the serialised settings, so
    the keys and cell ids of unbatched runs are those they had before the field existed.

    ``reuse_prefix`` is the prefix-reuse mode: the prompt is prefilled one chat message at a time
    and the KV state of the messages a later prompt repeats (the system prompt, a conversation's
    earlier turns) is kept instead of prefilled again (``LlamaCppGenerator.complete``). Its text
    is a function of the prompt alone, whatever ran before, but in general not the text of the
    one-shot prefill (rows summed in other block shapes flip near-tied tokens), so it is part of
    every key and cell id too, and left out of the serialised settings when off.
    """

    max_tokens: int = Field(default=256, ge=1, le=8192)
    temperature: float = Field(default=0.0, ge=0.0, le=5.0)
    top_k: int = Field(default=1, ge=0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    repeat_penalty: float = Field(default=1.0, gt=0.0)
    seed: int = 0
    batch: int = Field(default=1, ge=1, le=64, description="independent queries decoded together (1: one at a time)")
    reuse_prefix: bool = Field(default=False, description="prefill message by message, keeping the KV state of "
                                                          "messages a later prompt repeats")

    @model_serializer(mode="wrap")
    def _defaults_as_before(self, handler):
        data = handler(self)
        if isinstance(data, dict):
            if self.batch == 1:
                data.pop("batch", None)
            if not self.reuse_prefix:
                data.pop("reuse_prefix", None)
        return data


class Generation(Record):
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str
    seconds: float
    cached: bool = False


#: One entry of a batched generation: the prompt's generation, or the error that prompt alone
#: raised (a prompt longer than the context); one prompt's failure never fails the others.
GenerationResult = Union[Generation, RagleakError]

#: llama-cpp-python's completion stops at these strings as well as at end-of-generation tokens
STOP_STRINGS = ("<|im_end|>", "<|endoftext|>")


def is_greedy(params: DecodingParams) -> bool:
    """Whether ``params`` decode by plain argmax in llama-cpp-python (temperature 0 selects its
    greedy sampler whatever top-k/top-p say; a repeat penalty other than 1 would change the logits)."""
    return params.temperature == 0.0 and params.repeat_penalty == 1.0


@runtime_checkable
class Generator(Protocol):
    """What the pipeline and the defenses need from an LLM."""

    model_id: str  # identifies the exact weights (the GGUF SHA-256 for local models)

    def render(self, messages: Sequence[ChatMessage]) -> str: ...

    def generate(self, messages: Sequence[ChatMessage], params: DecodingParams | None = None) -> Generation: ...

    def next_token_logprobs(self, prompt: str) -> np.ndarray: ...


def resolve_threads(n_threads: int | None) -> int:
    """Explicit value, else $RAGLEAK_THREADS, else all cores (tests pin 1: llama.cpp's spinning
    OpenMP barriers slow 5-15x when another process holds a core)."""
    if n_threads:
        return n_threads
    env = os.environ.get("RAGLEAK_THREADS")
    return int(env) if env else max(1, os.cpu_count() or 1)


class LlamaCppGenerator:
    """A packaged GGUF model run in-process by llama-cpp-python.

    The constructor only stores settings; the model is loaded on first use (``prepare``).
    ``invocations`` counts real model calls, so callers can prove a cache hit did not run it.
    """

    def __init__(
        self,
        model: str,
        n_threads: int | None = None,
        n_ctx: int | None = None,
        params: DecodingParams | None = None,
    ) -> None:
        self.spec: ModelSpec = get_spec(model)
        self.model_id = self.spec.sha256
        self.n_threads = resolve_threads(n_threads)
        self.n_ctx = n_ctx or self.spec.n_ctx
        self.params = params or DecodingParams()
        self.invocations = 0
        self._llm = None
        self._decoder: LlamaMultiSequence | None = None
        self._lock = threading.Lock()
        # the prompt tokens whose KV state the context holds as the prefix-reuse mode built it,
        # and the chunk boundaries it was prefilled at; None when anything else used the context
        self._kept: tuple[list[int], frozenset[int]] | None = None
        self.prefilled_tokens = 0  # prompt tokens actually prefilled (not reused), for benchmarks

    @property
    def path(self) -> Path:
        return model_path(self.spec.name)

    def prepare(self) -> None:
        if self._llm is not None:
            return
        path = model_path(self.spec.name)
        try:
            from llama_cpp import Llama
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ModelNotInstalledError(
                "llama-cpp-python is not installed; install with: pip install llama-cpp-python==0.3.36"
            ) from exc
        t0 = time.perf_counter()
        self._llm = Llama(
            model_path=str(path),
            n_ctx=self.n_ctx,
            n_threads=self.n_threads,
            n_threads_batch=self.n_threads,
            seed=self.params.seed,
            verbose=False,
        )
        log.info("loaded %s in %.2fs (%d threads)", self.spec.name, time.perf_counter() - t0, self.n_threads)

    @property
    def llm(self):
        self.prepare()
        return self._llm

    def render(self, messages: Sequence[ChatMessage]) -> str:
        return render_chatml(messages)

    def tokenize(self, text: str) -> list[int]:
        # special=True so the ChatML control tokens are parsed as tokens, not as literal text
        return self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)

    def generate(self, messages: Sequence[ChatMessage], params: DecodingParams | None = None) -> Generation:
        return self.complete(self.render(messages), params)

    def complete(self, prompt: str, params: DecodingParams | None = None) -> Generation:
        """Continue a raw (already templated) prompt."""
        p = params or self.params
        with self._lock:
            tokens = self.tokenize(prompt)
            room = self.n_ctx - len(tokens)
            if room < 1:
                raise self._too_long(len(tokens))
            t0 = time.perf_counter()
            self.invocations += 1
            bounds: list[int] = []
            if p.reuse_prefix:
                bounds = self._prefill_by_message(prompt, tokens)
            else:
                # a fresh KV state for every prompt: reusing a cached prefix changes the batch
                # split of the prefill, which can flip a greedy token; the key must fix the output
                self._kept = None
                self.llm.reset()
                self.prefilled_tokens += len(tokens)
            try:
                out = self.llm.create_completion(
                    tokens,
                    max_tokens=min(p.max_tokens, room),
                    temperature=p.temperature,
                    top_k=p.top_k,
                    top_p=p.top_p,
                    min_p=0.0,
                    repeat_penalty=p.repeat_penalty,
                    seed=p.seed,
                    stop=list(STOP_STRINGS),
                )
            except BaseException:
                self._kept = None
                raise
            if p.reuse_prefix:
                # keep the prompt's state, not the answer's: the answer was decoded one token at a
                # time and a later prompt holds it (if at all) inside a message prefilled whole
                self.llm.n_tokens = len(tokens)
                self._kept = (tokens, frozenset(bounds))
            seconds = time.perf_counter() - t0
        choice = out["choices"][0]
        usage = out["usage"]
        return Generation(
            text=choice["text"].strip(),
            prompt_tokens=usage["prompt_tokens"],
            completion_tokens=usage["completion_tokens"],
            finish_reason=choice.get("finish_reason") or "stop",
            seconds=seconds,
        )

    def _prefill_by_message(self, prompt: str, tokens: list[int]) -> list[int]:
        """The prefix-reuse mode's prefill of every complete message: one ``eval`` per message,
        starting after the longest run of messages whose KV state the context already holds from
        the previous call of this mode. What follows the last complete message (the opened
        assistant turn of a rendered prompt) is left to ``create_completion``, which finds the
        evaluated prefix and prefills the rest. Each chunk's boundaries are a function of the
        prompt, and a chunk's KV values depend only on the chunks before it, so a reused state is
        the state a cold prefill of the same prompt builds: the text does not depend on what ran
        before.
        Returns the chunk boundaries (token offsets)."""
        bounds = []
        for end in message_ends(prompt):
            if end >= len(prompt):  # a raw prompt ending on a message: its last chunk is the completion's
                break
            head = self.tokenize(prompt[:end])
            # a boundary only where the prefix tokenizes as the start of the whole prompt
            if len(head) < len(tokens) and tokens[:len(head)] == head and (not bounds or len(head) > bounds[-1]):
                bounds.append(len(head))
        reused = 0
        if self._kept is not None:
            kept, kept_bounds = self._kept
            for b in bounds:
                if b not in kept_bounds or kept[:b] != tokens[:b]:
                    break
                reused = b
        llm = self.llm
        llm.n_tokens = reused  # eval drops the KV cells from here on
        self._kept = None
        for start, end in zip([0] + bounds, bounds):
            if start >= reused:
                llm.eval(tokens[start:end])
        self.prefilled_tokens += len(tokens) - reused
        return bounds

    def generate_many(self, batch: Sequence[Sequence[ChatMessage]],
                      params: DecodingParams | None = None) -> list[GenerationResult]:
        """Greedy generations of independent prompts decoded together (one llama.cpp context, one
        ``llama_decode`` per step for every unfinished prompt; ``rag.multiseq``). Each entry is
        the prompt's ``Generation`` or the ``RagleakError`` it alone raised. Non-greedy settings
        and single prompts go one at a time through ``generate``.

        An entry is *not* in general ``generate``'s text for the same prompt: a step of several
        sequences sums in another order than a step of one, and near-tied tokens flip (measured
        by ``benchmarks/bench_batched.py``), so a text can depend on the rest of its batch. It is
        deterministic for a given batch. Callers batch only where the decoding settings ask for
        it (``DecodingParams.batch``), and the cache keys such a generation by its whole batch."""
        p = params or self.params
        if len(batch) < 2 or not is_greedy(p):
            return [self._one(messages, p) for messages in batch]
        results: list[GenerationResult | None] = [None] * len(batch)
        prompts, stoppers, slots = [], [], []
        with self._lock:  # tokenizing goes through the loaded Llama
            for i, messages in enumerate(batch):
                tokens = self.tokenize(self.render(messages))
                room = self.n_ctx - len(tokens)
                if room < 1:
                    results[i] = self._too_long(len(tokens))
                    continue
                prompts.append(tokens)
                stoppers.append(CompletionText(self._piece, self._multi().is_end, min(p.max_tokens, room),
                                               STOP_STRINGS, bos=self.llm.token_bos()))
                slots.append(i)
        if prompts:
            t0 = time.perf_counter()
            # flash attention off, as the generator's Llama context has it
            self._multi().greedy(prompts, stoppers, max(s.max_tokens for s in stoppers) + 8, flash_attn=False)
            self.invocations += len(prompts)
            share = (time.perf_counter() - t0) / len(prompts)  # per-query times add up to the batch's
            for slot, tokens, stopper in zip(slots, prompts, stoppers):
                results[slot] = Generation(text=stopper.text.strip(), prompt_tokens=len(tokens),
                                           completion_tokens=len(stopper.tokens),
                                           finish_reason=stopper.finish_reason or "stop", seconds=share)
        return [r for r in results if r is not None]

    def _one(self, messages: Sequence[ChatMessage], params: DecodingParams) -> GenerationResult:
        try:
            return self.generate(messages, params)
        except RagleakError as exc:
            return exc

    def _too_long(self, n_tokens: int) -> RagleakError:
        return RagleakError(
            f"prompt has {n_tokens} tokens but the model context is {self.n_ctx}; "
            "lower top_k or chunk_words, or raise n_ctx"
        )

    def _multi(self) -> LlamaMultiSequence:
        """The multi-sequence decoder over this generator's GGUF file (loaded once, memory-mapped)."""
        if self._decoder is None:
            self._decoder = LlamaMultiSequence(self.path, self.n_threads)
        return self._decoder

    def _piece(self, token: int) -> bytes:
        # the token's bytes without llama-cpp-python's per-call BOS rule (CompletionText applies
        # it once, to the whole completion, as create_completion does)
        return self._multi().token_bytes([token])

    def next_token_logprobs(self, prompt: str) -> np.ndarray:
        """Log-probabilities (natural log, shape [vocab]) of the token that follows ``prompt``."""
        import llama_cpp

        with self._lock:
            tokens = self.tokenize(prompt)
            llm = self.llm
            self.invocations += 1
            self._kept = None
            llm.reset()
            llm.eval(tokens)
            logits = np.ctypeslib.as_array(
                llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1), shape=(llm.n_vocab(),)
            ).astype(np.float64)
            llm.reset()  # the next completion must not reuse this KV state as a prefix
        shifted = logits - logits.max()
        return shifted - np.log(np.exp(shifted).sum())

    def continuation_logprobs(self, prompt: str, continuation: str) -> list[tuple[str, float]]:
        """Each token of ``continuation`` (tokenized on its own, as it follows a templated
        prompt's final newline) with its natural-log probability after ``prompt`` and the
        tokens before it: how likely this model finds a given text, without generating."""
        multi = self._multi()
        tokens = multi.tokenize(continuation)
        prompt_tokens = multi.tokenize(prompt)
        if len(prompt_tokens) + len(tokens) > self.n_ctx:
            raise self._too_long(len(prompt_tokens) + len(tokens))
        self.invocations += 1
        values = multi.continuation_logprobs(prompt_tokens, tokens)
        return [(multi.detokenize([t]), float(v)) for t, v in zip(tokens, values)]

    def token_text(self, token: int) -> str:
        return self.llm.detokenize([token]).decode("utf-8", errors="replace")

    def embedded_chat_template(self) -> str | None:
        """The Jinja chat template stored in the GGUF metadata (used to check ``render``)."""
        return self.llm.metadata.get("tokenizer.chat_template")
