"""``KnowledgeAsymmetryAttack``: sentence-level attribution of a RAG answer's private content.

Black-box: the attacker sends Q = q1 ⊕ q2 to the target and the same Q to its own standard LLM
(no retrieval), scores every sentence of the RAG answer (``scoring.py``) and flags the ones the
LLM cannot explain. Queries come from Algorithm 1 (``refine.py``): single-domain when keywords
(or the view's ``topic``) are given - one q1 per keyword - else 10 broad q1s written by the LLM;
flagged sentences feed keywords back into new q1s until the budget is spent.

Decision rule: a saved classifier (``classifier_path``, ``classifier.py``) gives P(private);
without one, p = (1 - Ŝ) / 2 (maps Ŝ in [-1, 1] onto [1, 0]) and a sentence is flagged when
Ŝ < ``score_threshold``, i.e. p > (1 - score_threshold) / 2.

Scoring (``label``, after the queries): when the target exposed its trace, each observed
sentence gets its attribution label (``labels.py``) and the transcript's
``scoring["asymmetry"]`` holds the sentence labels and P(private) per query; ESR, F1 and AUC are
the registered metrics of ``ragleak.metrics.attribution``.
"""

from __future__ import annotations

import logging
from typing import ClassVar, Literal

import numpy as np
from pydantic import Field

from ragleak.attacks.asymmetry.classifier import AsymmetryClassifier
from ragleak.attacks.asymmetry.labels import attribution_label, context_passages
from ragleak.attacks.asymmetry.probe import Observation, observe
from ragleak.attacks.asymmetry.query import Q2_DEFAULT, StandardLLM, make_q1, make_query
from ragleak.attacks.asymmetry.refine import initial_q1s, run_refinement
from ragleak.attacks.asymmetry.scoring import SentenceScore
from ragleak.attacks.base import (Attack, AttackParams, AttackResult, CorpusView, QuerySession, SessionMode,
                                  StreamShape, Transcript)
from ragleak.context import RunContext
from ragleak.nlp.nli import NLIModel
from ragleak.rag.embedder import Embedder
from ragleak.rag.generator import DecodingParams
from ragleak.rag.models import DEFAULT_MODEL

log = logging.getLogger(__name__)


class AsymmetryParams(AttackParams):
    keywords: tuple[str, ...] = Field(default=(), description="single-domain keywords; empty: view topic, else multi-domain")
    q2: str = Q2_DEFAULT
    n_initial: int = Field(default=10, ge=1, le=50, description="broad q1s the LLM writes in multi-domain mode")
    nli: Literal["onnx", "llm", "none"] = "onnx"
    nli_min_cosine: float = Field(default=-1.0, ge=-1.0, le=1.0, description="apply NLI only when S_i >= this")
    standard_model: str = DEFAULT_MODEL
    standard_max_tokens: int = Field(default=160, ge=8, le=2048)
    classifier_path: str | None = None
    score_threshold: float = Field(default=0.5, ge=-1.0, le=1.0)
    keywords_per_refinement: int = Field(default=3, ge=1, le=10)
    tau: float = Field(default=0.5, gt=0.0, le=1.0, description="attribution threshold (ROUGE-L recall)")
    min_tokens: int = Field(default=3, ge=1)


class KnowledgeAsymmetryAttack(Attack):
    name: ClassVar[str] = "asymmetry"
    version: ClassVar[str] = "1"
    threat_model: ClassVar = "black-box"
    default_budget: ClassVar[int] = 20
    description: ClassVar[str] = "Knowledge asymmetry (Chen et al., ICLR 2026): RAG vs plain-LLM sentence attribution"
    Params: ClassVar[type[AttackParams]] = AsymmetryParams

    def _parts(self, ctx: RunContext) -> tuple[StandardLLM, Embedder, NLIModel | None]:
        """The plain LLM, the encoder and the NLI model, all from the run's stack."""
        p: AsymmetryParams = self.params  # type: ignore[assignment]
        stack = ctx.require_stack(f"attack {self.name}")
        llm = StandardLLM(stack.generator("standard", model=p.standard_model),
                          params=DecodingParams(max_tokens=p.standard_max_tokens))
        return llm, stack.embedder(), None if p.nli == "none" else stack.nli(p.nli, model=p.standard_model)

    def _probability(self, classifier: AsymmetryClassifier | None, sentences: list[SentenceScore]) -> np.ndarray:
        if classifier is not None:
            return classifier.predict_proba(sentences)
        return np.array([(1.0 - s.score) / 2.0 for s in sentences])

    def _threshold(self, classifier: AsymmetryClassifier | None) -> float:
        return 0.5 if classifier is not None else (1.0 - self.params.score_threshold) / 2.0

    def stream_shape(self, mode: SessionMode) -> StreamShape:
        # the standard LLM answers every query without retrieval (the refinement is adaptive)
        return super().stream_shape(mode)._replace(attacker_calls_per_query=1.0)

    def execute(self, session: QuerySession, view: CorpusView, ctx: RunContext) -> AttackResult:
        p: AsymmetryParams = self.params  # type: ignore[assignment]
        # the classifier file is checked first: a bad one stops the run before any model or query
        classifier = AsymmetryClassifier.load(p.classifier_path) if p.classifier_path else None
        llm, embedder, nli = self._parts(ctx)
        threshold = self._threshold(classifier)
        keywords = list(p.keywords) or ([view.topic] if view.topic else [])
        if keywords:
            mode, initial, from_llm = "single-domain", [make_q1([k]) for k in keywords], 0
        else:
            generated = initial_q1s(llm.generator, p.n_initial, llm.params)
            mode, initial, from_llm = "multi-domain", generated.q1s, generated.from_llm
        records: dict[str, int] = {}

        def ask(q1: str) -> Observation | None:
            query = make_query(q1, p.q2)
            record = session.ask(query)
            if record is None or not record.ok:
                return None
            records[query] = record.index
            return observe(query, record.answer or "", llm.answer(query), embedder, nli, nli_min_cosine=p.nli_min_cosine)

        def decide(sentences: list[SentenceScore]) -> list[bool]:
            return [bool(x >= threshold) for x in self._probability(classifier, sentences)]

        steps = run_refinement(initial, ask, decide, session.remaining, p.keywords_per_refinement)
        observations, extracted = [], []
        for step in steps:
            if step.observation is None:
                continue
            probs = self._probability(classifier, step.observation.sentences)
            flagged = [s.text for s, f in zip(step.observation.sentences, step.flagged) if f]
            extracted.extend(flagged)
            observations.append({
                "query_index": records[step.observation.query], "q1": step.q1, "refined_to": step.refined_to,
                "llm_answer": step.observation.llm_answer,
                "sentences": [s.to_dict() for s in step.observation.sentences],
                "p_private": [float(x) for x in probs], "flagged": step.flagged,
            })
        state = {"mode": mode, "initial_q1s": list(initial), "initial_from_llm": from_llm,
                 "nli": getattr(nli, "name", "none"), "decision": "classifier" if classifier else "score-threshold",
                 "threshold": threshold, "standard_llm_calls": llm.calls, "observations": observations}
        return AttackResult(extracted=list(dict.fromkeys(extracted)), state=state)

    def label(self, transcript: Transcript, view: CorpusView) -> Transcript:
        transcript = super().label(transcript, view)
        by_index = {q.index: q for q in transcript.queries}
        labels = []
        for obs in transcript.state.get("observations", []):
            record = by_index.get(obs["query_index"])
            if record is None or record.trace is None:
                continue
            passages = context_passages(record.trace)
            y = [attribution_label(s["text"], passages, self.params.tau, self.params.min_tokens)
                 for s in obs["sentences"]]
            labels.append({"query_index": obs["query_index"], "labels": y, "p_private": obs["p_private"]})
        if any(row["labels"] for row in labels):
            transcript.scoring["asymmetry"] = {"labels": labels, "threshold": transcript.state["threshold"]}
        return transcript
