"""Sentence attribution (the knowledge-asymmetry attack's ESR, F1 and AUC) as registered metrics.

The attack labels each sentence of a RAG answer private or public by comparing it with a plain
LLM's answer; ground truth is whether the sentence is drawn from the retrieved context
(``attacks.asymmetry.labels``). ESR = TP / (TP + FN), F1 and AUC are computed by
``attacks.asymmetry.metrics`` with query-level bootstrap intervals; these classes expose them
under the registry so the audit knows what they observe: the released text (``output``).
"""

from __future__ import annotations

from typing import ClassVar, Sequence

import numpy as np

from ragleak.metrics.base import Metric


class _Attribution(Metric):
    channels = frozenset({"output"})
    inputs: ClassVar[tuple[str, ...]] = ("sentence_labels", "p_private")
    key: ClassVar[str]

    def compute(self, groups: Sequence[tuple[Sequence[int], Sequence[float]]], threshold: float = 0.5) -> float:
        from ragleak.attacks.asymmetry.metrics import evaluate

        arrays = [(np.asarray(y), np.asarray(p)) for y, p in groups]
        return float(evaluate(arrays, threshold=threshold, n_resamples=1)[self.key]["value"])


class AttributionESR(_Attribution):
    """Extraction success rate: private sentences the attack flags, over all private sentences."""

    name: ClassVar[str] = "attribution_esr"
    key = "esr"


class AttributionF1(_Attribution):
    name: ClassVar[str] = "attribution_f1"
    key = "f1"


class AttributionAUC(_Attribution):
    name: ClassVar[str] = "attribution_auc"
    key = "auc"
