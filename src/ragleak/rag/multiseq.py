"""Lock-step decoding of several prompts in one llama.cpp context.

``LlamaMultiSequence`` loads the GGUF model once (memory-mapped, so it shares pages with the
generator's copy) and opens ``session``s: each session puts n prompts into one context as
sequences 0..n-1, returns their n next-token log-probability rows, and appends one chosen token to
every sequence per step (one ``llama_decode`` with n tokens), so a voted token costs one batched
step rather than n full prompt evaluations (DP token voting).

``greedy`` decodes n *independent* prompts the same way (batched generation of a cell's fixed
queries): each sequence gets its own argmax token per step and leaves the batch at its own end
token or token limit. It is not bit-identical to one-at-a-time decoding: a step of n tokens
sums in another order than a step of one, and near-tied tokens flip (measured by
``benchmarks/bench_batched.py``: 3 of 8 open-ended Qwen2.5-Coder-0.5B texts identical at 32
tokens), so batched generation is an explicit mode (``DecodingParams.batch``).
"""

from __future__ import annotations

import ctypes
import math
import threading
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Iterator, Mapping, Protocol, Sequence

import numpy as np

from ragleak.errors import ModelNotInstalledError, RagleakError
from ragleak.rag.exact_q8 import exact_copy


def log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


class Session:
    """n sequences advancing together; ``logprobs()`` is (n, vocab)."""

    def __init__(self, owner: "LlamaMultiSequence", prompts: Sequence[list[int]], max_new_tokens: int,
                 flash_attn: bool | None = None) -> None:
        L = owner.lib
        self._L, self._owner, self.n = L, owner, len(prompts)
        longest = max(len(p) for p in prompts)
        per_seq = 256 * math.ceil((longest + max_new_tokens + 2) / 256)
        params = L.llama_context_default_params()
        params.n_ctx = per_seq * self.n
        params.n_batch = max(longest, self.n)
        params.n_ubatch = min(512, params.n_batch)
        params.n_seq_max = self.n
        params.kv_unified = False
        if flash_attn is not None:  # None: llama.cpp's default (auto); the generator's Llama says off
            params.flash_attn_type = (L.LLAMA_FLASH_ATTN_TYPE_ENABLED if flash_attn
                                      else L.LLAMA_FLASH_ATTN_TYPE_DISABLED)
        params.n_threads = params.n_threads_batch = owner.n_threads
        self._ctx = L.llama_init_from_model(owner.model, params)
        if not self._ctx:
            raise RagleakError("llama.cpp could not create a multi-sequence context")
        self._batch = L.llama_batch_init(params.n_batch, 0, self.n)
        self._pos = [0] * self.n
        self._rows: list[np.ndarray] = []
        for seq, tokens in enumerate(prompts):  # one prefill per sequence keeps n_batch small
            self._decode([(t, j, seq, j == len(tokens) - 1) for j, t in enumerate(tokens)])
            self._rows.append(self._row(len(tokens) - 1))
            self._pos[seq] = len(tokens)
        self._logprobs: np.ndarray | None = None

    def _decode(self, entries: list[tuple[int, int, int, bool]]) -> None:
        b = self._batch
        b.n_tokens = len(entries)
        for i, (token, pos, seq, want) in enumerate(entries):
            b.token[i], b.pos[i], b.n_seq_id[i], b.logits[i] = token, pos, 1, want
            b.seq_id[i][0] = seq
        if self._L.llama_decode(self._ctx, b) != 0:
            raise RagleakError("llama_decode failed (context full?)")

    def _row(self, i: int) -> np.ndarray:
        ptr = self._L.llama_get_logits_ith(self._ctx, i)
        return np.ctypeslib.as_array(ptr, shape=(self._owner.n_vocab,)).astype(np.float64)

    def logprobs(self) -> np.ndarray:
        if self._logprobs is None:
            self._logprobs = log_softmax(np.stack(self._rows))
        return self._logprobs

    def logits(self, seq: int) -> np.ndarray:
        """Sequence ``seq``'s raw next-token logits (as of its last step)."""
        return self._rows[seq]

    def append(self, token: int) -> None:
        self.advance({s: token for s in range(self.n)})

    def advance(self, tokens: Mapping[int, int]) -> None:
        """Append ``tokens[seq]`` to each sequence named (one ``llama_decode`` for all of them);
        sequences not named stay where they are (a finished one costs nothing more)."""
        seqs = sorted(tokens)
        self._decode([(tokens[s], self._pos[s], s, True) for s in seqs])
        for i, s in enumerate(seqs):
            self._pos[s] += 1
            self._rows[s] = self._row(i)
        self._logprobs = None

    def close(self) -> None:
        if self._ctx:
            self._L.llama_batch_free(self._batch)
            self._L.llama_free(self._ctx)
            self._ctx = None


class Stopper(Protocol):
    """Sees a sequence's tokens one by one; ``push`` returns True once the sequence is finished."""

    def push(self, token: int) -> bool: ...


# whether decoders load the verified Q8_0 copy by default (a benchmark compares both)
EXACT_WEIGHTS = True


class LlamaMultiSequence:
    """``model_path``'s model for multi-sequence work. With ``exact_weights`` (default
    ``EXACT_WEIGHTS``) it loads the verified Q8_0 copy of the file where there is one
    (``rag.exact_q8``: the same logits bit for bit, faster several-sequence steps); ``weights``
    says which it loaded."""

    def __init__(self, model_path: Path, n_threads: int, exact_weights: bool | None = None) -> None:
        self.model_path = Path(model_path)
        self.n_threads = n_threads
        self.exact_weights = EXACT_WEIGHTS if exact_weights is None else exact_weights
        self.weights = "not loaded"
        self.model = None
        # re-entrant: one thread may hold two sessions at once (private-rag decodes its public
        # prompt in a session of its own beside the voters'); other threads still wait
        self._lock = threading.RLock()

    def prepare(self) -> None:
        if self.model is not None:
            return
        try:
            import llama_cpp
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ModelNotInstalledError("llama-cpp-python is not installed") from exc
        self.lib = llama_cpp
        from llama_cpp._logger import set_verbose
        from llama_cpp._utils import suppress_stdout_stderr

        set_verbose(False)  # llama.cpp's C log goes to stderr below ERROR otherwise (as Llama(verbose=False))
        llama_cpp.llama_backend_init()
        path, self.weights = self.model_path, "original weights"
        if self.exact_weights:
            path, self.weights = exact_copy(self.model_path, partial(logits_match, n_threads=self.n_threads))
        with suppress_stdout_stderr(disable=False):  # the vocab loader writes to stderr directly
            self.model = llama_cpp.llama_model_load_from_file(str(path).encode(), llama_cpp.llama_model_default_params())
        if not self.model:
            raise ModelNotInstalledError(f"llama.cpp could not load {path}")
        self.vocab = llama_cpp.llama_model_get_vocab(self.model)
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(self.vocab)

    def tokenize(self, text: str) -> list[int]:
        self.prepare()
        data = text.encode("utf-8")
        buf = (self.lib.llama_token * (len(data) + 16))()
        n = self.lib.llama_tokenize(self.vocab, data, len(data), buf, len(buf), False, True)
        return list(buf[:n])

    def detokenize(self, tokens: Sequence[int]) -> str:
        return self.token_bytes(tokens).decode("utf-8", errors="replace")

    def is_end(self, token: int) -> bool:
        return bool(self.lib.llama_vocab_is_eog(self.vocab, token))

    def end_tokens(self) -> list[int]:
        self.prepare()
        ids = {self.lib.llama_vocab_eos(self.vocab), self.lib.llama_vocab_eot(self.vocab)}
        return sorted(t for t in ids if t >= 0)

    def close(self) -> None:
        """Free the model (sessions are freed when their ``with`` block ends)."""
        if self.model is not None:
            self.lib.llama_model_free(self.model)
            self.model = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library may already be gone
            pass

    @contextmanager
    def session(self, prompts: Sequence[str], max_new_tokens: int) -> Iterator[Session]:
        self.prepare()
        with self.session_of_tokens([self.tokenize(p) for p in prompts], max_new_tokens) as session:
            yield session

    @contextmanager
    def session_of_tokens(self, prompts: Sequence[Sequence[int]], max_new_tokens: int,
                          flash_attn: bool | None = None) -> Iterator[Session]:
        self.prepare()
        with self._lock:
            session = Session(self, [list(p) for p in prompts], max_new_tokens, flash_attn=flash_attn)
            try:
                yield session
            finally:
                session.close()

    def greedy(self, prompts: Sequence[Sequence[int]], stoppers: Sequence["Stopper"], max_new_tokens: int,
               flash_attn: bool | None = None) -> None:
        """Greedy (argmax, first index on ties, as llama.cpp's greedy sampler) decoding of
        independent token prompts in one context: each step appends every unfinished sequence's
        own token in one ``llama_decode``. ``stoppers[i].push(token)`` sees each token of
        sequence i and says when it is finished (end token, stop string, token limit); the
        tokens and text are the stoppers'. ``max_new_tokens`` sizes the context (a stopper must
        finish within it)."""
        if len(prompts) != len(stoppers):
            raise ValueError("one stopper per prompt")
        if not prompts:
            return
        self.prepare()
        with self._lock:
            session = Session(self, [list(p) for p in prompts], max_new_tokens, flash_attn=flash_attn)
            try:
                active = list(range(len(prompts)))
                while active:
                    step: dict[int, int] = {}
                    for seq in active:
                        token = int(np.argmax(session.logits(seq)))
                        if not stoppers[seq].push(token):
                            step[seq] = token
                    active = sorted(step)
                    if step:
                        session.advance(step)
            finally:
                session.close()

    def continuation_logprobs(self, prompt: Sequence[int], continuation: Sequence[int]) -> np.ndarray:
        """log p(continuation[i] | prompt, continuation[:i]) for every i: one prefill of the
        whole text in a fresh context, with logits kept only where a continuation token is
        predicted (a likelihood, no decoding)."""
        prompt, continuation = list(prompt), list(continuation)
        if not continuation:
            return np.zeros(0)
        if not prompt:
            raise ValueError("continuation_logprobs needs a non-empty prompt (the first token has no context)")
        self.prepare()
        L, text = self.lib, prompt + continuation
        with self._lock:
            params = L.llama_context_default_params()
            params.n_ctx = 256 * math.ceil((len(text) + 2) / 256)
            params.n_batch = params.n_ubatch = len(text)
            params.n_seq_max = 1
            params.flash_attn_type = L.LLAMA_FLASH_ATTN_TYPE_DISABLED  # as the generator's context
            params.n_threads = params.n_threads_batch = self.n_threads
            ctx = L.llama_init_from_model(self.model, params)
            if not ctx:
                raise RagleakError("llama.cpp could not create a context for scoring")
            batch = L.llama_batch_init(len(text), 0, 1)
            try:
                first = len(prompt) - 1  # the position whose logits predict continuation[0]
                batch.n_tokens = len(text)
                for i, token in enumerate(text):
                    batch.token[i], batch.pos[i], batch.n_seq_id[i] = token, i, 1
                    batch.seq_id[i][0] = 0
                    batch.logits[i] = first <= i < len(text) - 1
                if L.llama_decode(ctx, batch) != 0:
                    raise RagleakError("llama_decode failed while scoring a continuation")
                rows = np.stack([np.ctypeslib.as_array(L.llama_get_logits_ith(ctx, first + j),
                                                       shape=(self.n_vocab,)).astype(np.float64)
                                 for j in range(len(continuation))])
            finally:
                L.llama_batch_free(batch)
                L.llama_free(ctx)
        return log_softmax(rows)[np.arange(len(continuation)), continuation]

    def token_bytes(self, tokens: Sequence[int]) -> bytes:
        """The bytes ``tokens`` spell (special tokens spell nothing, as in a completion's text)."""
        self.prepare()
        out = bytearray()
        buf = ctypes.create_string_buffer(256)
        for token in tokens:
            n = self.lib.llama_token_to_piece(self.vocab, token, buf, len(buf), 0, False)
            out += buf.raw[:n]
        return bytes(out)


# a probe: short prompts of different lengths (so lock-step rows are at different positions)
_PROBE = ["The committee met on Tuesday to review the", "Write one sentence about rivers.",
          "List three colours:", "In 1887 the company moved its offices to a new building on",
          "Question: what is the capital of France? Answer:", "def add(a, b):\n    return",
          "Dear Ms. Patel, thank you for your letter of", "The patient was admitted with"]
_PROBE_STEPS = 3


def _probe_logits(path: Path, n_threads: int) -> list[np.ndarray]:
    """Every logits row of the probe on ``path``: each prompt prefilled, then every prompt
    stepping in lock-step (llama.cpp's several-column kernels), then the first prompt stepping
    alone (its one-column kernels), always appending token 0 (the rows, not the tokens, are
    compared); with flash attention off (as batched generation runs) and at llama.cpp's default
    (as voting sessions run)."""
    decoder = LlamaMultiSequence(path, n_threads, exact_weights=False)
    try:
        decoder.prepare()
        prompts = [decoder.tokenize(p) for p in _PROBE]
        rows: list[np.ndarray] = []
        for flash_attn in (False, None):
            with decoder.session_of_tokens(prompts, 2 * _PROBE_STEPS + 2, flash_attn=flash_attn) as session:
                rows += [session.logits(s).copy() for s in range(session.n)]
                for _ in range(_PROBE_STEPS):
                    session.advance({s: 0 for s in range(session.n)})
                    rows += [session.logits(s).copy() for s in range(session.n)]
                for _ in range(_PROBE_STEPS):
                    session.advance({0: 0})
                    rows.append(session.logits(0).copy())
        return rows
    finally:
        decoder.close()


def logits_match(source: Path, copy: Path, n_threads: int) -> tuple[bool, str]:
    """Whether ``copy`` gives the same logits as ``source`` on the probe, bit for bit."""
    expected, got = _probe_logits(source, n_threads), _probe_logits(copy, n_threads)
    differing = sum(not np.array_equal(a, b) for a, b in zip(expected, got))
    if len(expected) != len(got) or differing:
        worst = max(float(np.max(np.abs(a - b))) for a, b in zip(expected, got))
        return False, f"{differing} of {len(expected)} probe logit rows differ (largest difference {worst:.3g})"
    return True, f"{len(expected)} probe logit rows bit-identical"


def decoder_for(generator, current: "LlamaMultiSequence | None" = None) -> LlamaMultiSequence:
    """The multi-sequence decoder over ``generator``'s GGUF file (``current`` when it already is);
    refuses generators that are not llama.cpp models (a cached one is fine: it forwards ``path``)."""
    path, threads = getattr(generator, "path", None), getattr(generator, "n_threads", None)
    if path is None or threads is None:
        raise RagleakError("DP token voting needs a llama.cpp generator (LlamaCppGenerator, optionally cached)")
    if current is not None and current.model_path == Path(path):
        return current
    return LlamaMultiSequence(path, threads)
