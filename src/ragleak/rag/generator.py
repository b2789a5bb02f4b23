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
from typing import Protocol, Sequence, runtime_checkable

import numpy as np
from pydantic import Field

from ragleak.errors import ModelNotInstalledError, RagleakError
from ragleak.rag.models import ModelSpec, get_spec, model_path
from ragleak.rag.prompt import ChatMessage, render_chatml
from ragleak.records import Record

log = logging.getLogger(__name__)


class DecodingParams(Record):
    """Sampling settings. temperature 0 means greedy (argmax) decoding."""

    max_tokens: int = Field(default=256, ge=1, le=8192)
    temperature: float = Field(default=0.0, ge=0.0, le=5.0)
    top_k: int = Field(default=1, ge=0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    repeat_penalty: float = Field(default=1.0, gt=0.0)
    seed: int = 0


class Generation(Record):
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str
    seconds: float
    cached: bool = False


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
        self._lock = threading.Lock()

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
                raise RagleakError(
                    f"prompt has {len(tokens)} tokens but the model context is {self.n_ctx}; "
                    "lower top_k or chunk_words, or raise n_ctx"
                )
            t0 = time.perf_counter()
            self.invocations += 1
            # a fresh KV state for every prompt: reusing a cached prefix changes the batch split
            # of the prefill, which can flip a greedy token; the cache key must fix the output
            self.llm.reset()
            out = self.llm.create_completion(
                tokens,
                max_tokens=min(p.max_tokens, room),
                temperature=p.temperature,
                top_k=p.top_k,
                top_p=p.top_p,
                min_p=0.0,
                repeat_penalty=p.repeat_penalty,
                seed=p.seed,
                stop=["<|im_end|>", "<|endoftext|>"],
            )
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

    def next_token_logprobs(self, prompt: str) -> np.ndarray:
        """Log-probabilities (natural log, shape [vocab]) of the token that follows ``prompt``."""
        import llama_cpp

        with self._lock:
            tokens = self.tokenize(prompt)
            llm = self.llm
            self.invocations += 1
            llm.reset()
            llm.eval(tokens)
            logits = np.ctypeslib.as_array(
                llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1), shape=(llm.n_vocab(),)
            ).astype(np.float64)
            llm.reset()  # the next completion must not reuse this KV state as a prefix
        shifted = logits - logits.max()
        return shifted - np.log(np.exp(shifted).sum())

    def token_text(self, token: int) -> str:
        return self.llm.detokenize([token]).decode("utf-8", errors="replace")

    def embedded_chat_template(self) -> str | None:
        """The Jinja chat template stored in the GGUF metadata (used to check ``render``)."""
        return self.llm.metadata.get("tokenizer.chat_template")
