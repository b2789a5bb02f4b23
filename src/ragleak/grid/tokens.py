"""How many tokens a stack's RAG prompt has on a given corpus, for the dry-run's ETA.

A target prompt is the stack's system prompt, the ChatML template, ``top_k`` retrieved passages
("Passage i: ..." lines) and the question. The passages dominate, and their length is a property
of the corpus and the chunking, not of ``chunk_words``: synthetic-corp's documents are ~52 words
(one short passage each) while a ``chunk_words`` of 120 would suggest twice that. So the estimate
chunks the cell's real corpus as the stack does and counts the passages' tokens with the stack
model's own tokenizer, loaded vocabulary-only through llama.cpp (~0.5 s, no weights). Without the
model file on disk (not installed, or a chunked model not assembled yet: the dry run does not
assemble it) or without llama-cpp-python it counts words and converts them at
``TOKENS_PER_WORD``, and says so.

The count is cached per (corpus, its parameters, stack settings that shape a prompt) in
``RAGLEAK_HOME/plan-tokens.json``, so a second dry run of the same grid costs no tokenizing.
"""

from __future__ import annotations

import json
import logging
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Sequence

from ragleak.config import StackConfig
from ragleak.corpora import load_corpus
from ragleak.corpora.chunking import chunk_documents
from ragleak.files import atomic_write_text, ragleak_home
from ragleak.rag.prompt import ChatMessage, build_rag_messages, message_ends, render_chatml
from ragleak.records import Passage, digest

log = logging.getLogger(__name__)

TOKENS_PER_WORD = 1.35  # fallback only: English prose to Qwen/SmolLM tokens (PII-dense text runs ~2.5)
QUERY_WORDS = 20  # an attack query's length in words when the plan does not know the query (PS prompts ~15-25)
TOKENS_VERSION = 2  # bump when the way a count is made changes, so cached counts are redone

Tokenizer = Callable[[str], int]


@dataclass(frozen=True)
class PromptTokens:
    """Token counts of one (corpus, stack) pair's target prompt."""

    passages: int  # passages the corpus chunks into
    passage_tokens: float  # mean tokens of one "Passage i: ..." context line
    frame_tokens: int  # system prompt + template + "Context:"/"Question:" + a query of QUERY_WORDS words
    top_k: int
    tokenizer: str  # "llama.cpp vocab of MODEL" or "words x 1.35 (assumed)"
    system_tokens: int = 0  # the rendered system message alone (what the prefix-reuse mode keeps)

    @property
    def prompt(self) -> float:
        """Tokens of a single-turn target prompt: the frame and min(top_k, passages) passages."""
        return self.frame_tokens + min(self.top_k, self.passages) * self.passage_tokens


def present_model_file(model: str) -> Path | None:
    """The model's GGUF file if it is already on disk; None rather than assembling a chunked
    model (hundreds of MB copied and hashed: not what a dry run should cost)."""
    from ragleak.rag.models import get_spec, package_dir

    spec = get_spec(model)
    if spec.layout == "file":
        folder = package_dir(spec.modules[0])
        path = folder / spec.filename if folder is not None else None
    else:
        path = ragleak_home() / "models" / spec.filename
    return path if path is not None and path.exists() and path.stat().st_size == spec.size else None


def _vocab_tokenizer(model: str) -> Tokenizer | None:
    """The model's tokenizer, loaded without weights (llama.cpp ``vocab_only``), or None."""
    try:
        import llama_cpp
        from llama_cpp._internals import LlamaModel  # the pinned llama-cpp-python's vocab-only loader

        path = present_model_file(model)
        if path is None:
            log.info("plan: %s is not assembled yet; counting words x %.2f", model, TOKENS_PER_WORD)
            return None
        params = llama_cpp.llama_model_default_params()
        params.vocab_only = True
        vocab = LlamaModel(path_model=str(path), params=params, verbose=False)
    except Exception as exc:  # noqa: BLE001 - any failure here only costs precision, and is reported
        log.info("plan: no tokenizer for %s (%s); counting words x %.2f", model, exc, TOKENS_PER_WORD)
        return None
    return lambda text: len(vocab.tokenize(text.encode("utf-8"), add_bos=False, special=True))


def _word_tokenizer(text: str) -> int:
    return round(len(text.split()) * TOKENS_PER_WORD)


def count_prompt_tokens(passages: Sequence[Passage], stack: StackConfig, count: Tokenizer, tokenizer: str) -> PromptTokens:
    """``PromptTokens`` of ``passages`` (a corpus chunked as ``stack`` chunks it) under ``count``."""
    query = " ".join(["word"] * QUERY_WORDS)
    frame = count(render_chatml(build_rag_messages(query, [], stack.system_prompt)))
    # "Context:\n" and the blank line before the question, beyond the passage-free frame
    frame += count("Context:\n\n") if passages else 0
    lines = [count(f"Passage {i}: {p.text}\n") for i, p in enumerate(passages, start=1)]
    system = render_chatml([ChatMessage(role="system", content=stack.system_prompt)])
    return PromptTokens(passages=len(passages), passage_tokens=statistics.fmean(lines) if lines else 0.0,
                        frame_tokens=frame, top_k=stack.top_k, tokenizer=tokenizer,
                        system_tokens=count(system[:message_ends(system)[0]]))


class PromptTokenCounter:
    """``PromptTokens`` of (corpus, corpus params, stack), memoised here and on disk. ``count``
    replaces the model's tokenizer (its counts are memoised in this object only)."""

    def __init__(self, path: Path | None = None, count: Tokenizer | None = None) -> None:
        self.path = path or ragleak_home() / "plan-tokens.json"
        self.count = count
        self._disk: dict | None = {} if count is not None else None
        self._tokenizers: dict[str, Tokenizer | None] = {}

    def _stored(self) -> dict:
        if self._disk is None:
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                data = {}
            self._disk = data if isinstance(data, dict) else {}
        return self._disk

    @staticmethod
    def key(corpus: str, corpus_params: dict, stack: StackConfig) -> str:
        return digest({"v": TOKENS_VERSION, "corpus": corpus, "params": corpus_params, "model": stack.model,
                       "chunk_words": stack.chunk_words, "chunk_overlap": stack.chunk_overlap,
                       "system_prompt": stack.system_prompt, "top_k": stack.top_k})

    def __call__(self, corpus: str, corpus_params: dict, stack: StackConfig) -> PromptTokens | None:
        """None when the corpus cannot be loaded (the cell will record that error itself)."""
        key = self.key(corpus, corpus_params, stack)
        row = self._stored().get(key)
        if isinstance(row, dict):
            try:
                return PromptTokens(**row)
            except TypeError:
                pass  # written by another layout: count again
        try:
            passages = [p for p in chunk_documents(load_corpus(corpus, **corpus_params), stack.chunk_words,
                                                   stack.chunk_overlap) if p.text.strip()]
        except Exception as exc:  # noqa: BLE001 - a corpus that fails to load fails its cell, not the plan
            log.info("plan: corpus %s could not be loaded for token counts: %s", corpus, exc)
            return None
        if self.count is not None:
            tokens = count_prompt_tokens(passages, stack, self.count, "given")
            self._stored()[key] = asdict(tokens)
            return tokens
        if stack.model not in self._tokenizers:
            self._tokenizers[stack.model] = _vocab_tokenizer(stack.model)
        vocab = self._tokenizers[stack.model]
        tokens = count_prompt_tokens(passages, stack, vocab, f"llama.cpp vocab of {stack.model}") if vocab else \
            count_prompt_tokens(passages, stack, _word_tokenizer, f"words x {TOKENS_PER_WORD} (assumed)")
        if vocab is None:
            return tokens  # not kept: a later run with the model installed counts it properly
        self._stored()[key] = asdict(tokens)
        try:
            atomic_write_text(self.path, json.dumps(self._stored(), indent=1, sort_keys=True))
        except OSError as exc:  # a read-only home costs only the reuse
            log.info("plan: could not keep token counts in %s: %s", self.path, exc)
        return tokens
