"""ROUGE-L: one tokenizer, one longest-common-subsequence, one precision/recall/F1.

Shared by extraction scoring (metrics), by the knowledge-asymmetry attack's attribution labels and
by RAG-Thief's memory deduplication, so the three uses cannot drift apart. It reproduces the
``rouge-score`` package's ``rougeL`` with ``use_stemmer=False`` (Lin, 2004, "ROUGE: A Package for
Automatic Evaluation of Summaries"): text is lower-cased, every run of characters outside
``[a-z0-9]`` separates tokens; a test compares the two.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

_TOKEN = re.compile(r"[a-z0-9]+")


def tokens(text: str) -> list[str]:
    """Lower-cased alphanumeric word tokens (rouge-score's default tokenizer, without stemming)."""
    return _TOKEN.findall(text.lower())


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence of two token sequences.

    Bit-parallel (Hyyroe, 2004, "A Bit-Vector Algorithm for Computing Levenshtein and Damerau
    Edit Distances"): one big-integer step per token of the shorter sequence.
    """
    if not a or not b:
        return 0
    if len(a) < len(b):
        a, b = b, a
    masks: dict[str, int] = {}
    for i, tok in enumerate(a):
        masks[tok] = masks.get(tok, 0) | (1 << i)
    full = (1 << len(a)) - 1
    v = full
    for tok in b:
        u = v & masks.get(tok, 0)
        v = ((v + u) | (v - u)) & full
    return len(a) - bin(v).count("1")


@dataclass(frozen=True)
class Rouge:
    precision: float
    recall: float
    f1: float


def rouge_l(candidate: str, reference: str) -> Rouge:
    """ROUGE-L of ``candidate`` against ``reference``: precision = LCS / |candidate|, recall =
    LCS / |reference| (in tokens), F1 their harmonic mean; all zero when nothing is shared."""
    c, r = tokens(candidate), tokens(reference)
    lcs = lcs_length(c, r)
    if lcs == 0:
        return Rouge(0.0, 0.0, 0.0)
    p, rec = lcs / len(c), lcs / len(r)
    return Rouge(p, rec, 2 * p * rec / (p + rec))
