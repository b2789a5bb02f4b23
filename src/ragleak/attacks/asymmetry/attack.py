"""``KnowledgeAsymmetryAttack``: sentence-level attribution of a RAG answer's private content.

Black-box: the attacker sends Q = q1 ⊕ q2 to the target and the same Q to its own standard LLM
(no retrieval), scores every sentence of the RAG answer (``scoring.py``) and flags the ones the
LLM cannot explain. Queries come from Algorithm 1 (``refine.py``): single-domain when keywords
(or the view's ``topic``) are given - one q1 per keyword - else ``n_initial`` broad,
domain-agnostic q1s written by the attacker LLM; flagged sentences go back to the attacker LLM,
which writes new q1s, until the budget is spent.

Models: the standard LLM is the stack's ``standard`` generator, the config's model unless
``standard_model`` names another, decoding with the stack's parameters (the same max tokens as
the target) unless ``standard_max_tokens`` is set; the q1 writer is the ``attacker`` generator.
NLI is off by default (``nli="none"``: Ŝ = S, the paper's cosine max-similarity); ``onnx`` and
``llm`` are options (see ``ragleak.nlp.nli`` for what each was measured to do).

Why surprisal is the default scorer: on the development runs (invented facts and the multi-domain
mix, benchmark seed 7, zero prior, 30 queries) the sentence AUC was 0.95 and 0.89 for surprisal
against 0.67 and 0.66 for the cosine score, and k = 3 surprising tokens was chosen there; the
committed benchmark (``benchmarks/bench_asymmetry.py``, seed 0) is the held-out check.

Decision rule, while querying: a saved classifier (``classifier_path``, ``classifier.py``) gives
P(private); without one the ``scorer`` does:

* ``cosine`` (the paper's score): p = (1 - Ŝ) / 2 (maps Ŝ in [-1, 1] onto [1, 0]) and a sentence
  is flagged when Ŝ < ``score_threshold``, i.e. p > (1 - score_threshold) / 2;
* ``surprisal`` [IMPL-CHOICE]: with n the sentence's tokens the standard LLM gives under 1%
  probability (``scoring.py``) and k = ``surprising_tokens``, p grows with n (ties broken by the
  total surprisal, ``surprisal_probability``) and the sentence is flagged when n >= k (p >= 1/2).
  Needs a standard LLM that can score a text (a local llama.cpp model).

Scoring (``label``, after the queries): when the target exposed its trace, each observed
sentence gets its attribution label (``labels.py``; the boilerplate pool is every passage the
run saw) and ``scoring["asymmetry"]`` holds the labels and P(private) per query, plus the
documents the run reached. With ``train`` the paper's protocol runs instead: the ReLU MLP is
fitted (on ``classifier_features``: ``surprisal`` by default, ``paper`` for Ŝ alone as the paper
has it) on a seeded 7:3 split of the run's labelled queries (``test_fraction`` held out), the
scoring rows are the held-out queries only, scored by the fitted classifier at 0.5, and the
classifier is saved to ``classifier_out`` (plain JSON arrays) for reuse on another target. ESR,
F1 and AUC are the registered metrics of ``ragleak.metrics.attribution``.
"""

from __future__ import annotations

import logging
from typing import ClassVar, Literal

import numpy as np
from pydantic import Field, model_validator

from ragleak.attacks.asymmetry.classifier import FEATURE_SETS, SURPRISAL_FEATURES, AsymmetryClassifier, split_by_query
from ragleak.attacks.asymmetry.labels import Boilerplate, attribution_label, context_passages
from ragleak.attacks.asymmetry.probe import Observation, observe
from ragleak.attacks.asymmetry.query import Q2_DEFAULT, StandardLLM, make_q1, make_query
from ragleak.attacks.asymmetry.refine import FACETS, initial_q1s, refine_q1, run_refinement
from ragleak.attacks.asymmetry.scoring import SentenceScore, surprisal_probability
from ragleak.attacks.base import Attack, AttackParams, AttackResult, CorpusView, QuerySession, Transcript
from ragleak.context import RunContext
from ragleak.errors import ConfigError
from ragleak.nlp.nli import NLIModel
from ragleak.rag.embedder import Embedder
from ragleak.rag.generator import Generator

log = logging.getLogger(__name__)


WRITER_MAX_TOKENS = 24  # per q1 the attacker LLM writes (a q1 has at most ~20 words)


class AsymmetryParams(AttackParams):
    keywords: tuple[str, ...] = Field(default=(), description="single-domain keywords; empty: view topic, else zero prior")
    q2: str = Q2_DEFAULT
    n_initial: int = Field(default=10, ge=1, le=50, description="broad q1s the attacker LLM writes with zero prior")
    scorer: Literal["cosine", "surprisal"] = Field(
        default="surprisal", description="surprisal: tokens the standard LLM could not predict; cosine: the paper's Ŝ")
    surprising_tokens: int = Field(default=3, ge=1, le=50,
                                   description="surprisal scorer: flag a sentence with at least this many")
    nli: Literal["none", "onnx", "llm"] = Field(default="none", description="NLI correction of the cosine score")
    nli_min_cosine: float = Field(default=-1.0, ge=-1.0, le=1.0, description="apply NLI only when S_i >= this")
    standard_model: str | None = Field(default=None, description="the standard LLM; default: the stack's model")
    standard_max_tokens: int | None = Field(default=None, ge=8, le=2048,
                                            description="default: the stack's decoding (the target's max tokens)")
    classifier_path: str | None = None
    score_threshold: float = Field(default=0.5, ge=-1.0, le=1.0)
    keywords_per_refinement: int = Field(default=3, ge=1, le=10)
    train: bool = Field(default=False, description="fit the MLP on a 7:3 query split of this run; score the 30%")
    test_fraction: float = Field(default=0.3, gt=0.0, lt=1.0)
    classifier_features: str = Field(default="surprisal",
                                     description="feature set of the trained MLP (paper: Ŝ only, as the paper)")
    classifier_out: str | None = Field(default=None, description="where --train saves the classifier (JSON)")
    tau: float = Field(default=0.5, gt=0.0, le=1.0, description="attribution threshold (ROUGE-L recall)")
    min_tokens: int = Field(default=3, ge=1)
    boilerplate_share: float = Field(default=0.25, gt=0.0, le=1.0,
                                     description="a 4-gram in this share of the seen passages is boilerplate")

    @model_validator(mode="after")
    def _consistent(self) -> "AsymmetryParams":
        if self.classifier_features not in FEATURE_SETS:
            raise ValueError(f"unknown classifier_features {self.classifier_features!r}; known: {', '.join(FEATURE_SETS)}")
        if self.train and self.classifier_path:
            raise ValueError("give train or classifier_path, not both")
        return self


def facet_queries(keywords: list[str]) -> list[str]:
    """Broad q1s asked when the refinement queue runs dry with budget left: one per facet (kinds
    of content any collection has) with zero prior; with keywords, each facet within a keyword's
    subject ("people and their roles in <keyword>"), facets and keywords rotating so the first
    few already cover every keyword."""
    if not keywords:
        return [make_q1([facet]) for facet in FACETS]
    # round q pairs facet f with keyword f + q: over len(keywords) rounds every pair comes once
    f, k = len(FACETS), len(keywords)
    return list(dict.fromkeys(make_q1([f"{FACETS[i % f]} in {keywords[(i % f + i // f) % k]}"])
                              for i in range(f * k)))


class KnowledgeAsymmetryAttack(Attack):
    name: ClassVar[str] = "asymmetry"
    version: ClassVar[str] = "4"
    threat_model: ClassVar = "black-box"
    default_budget: ClassVar[int] = 30
    description: ClassVar[str] = "Knowledge asymmetry (Chen et al., ICLR 2026): RAG vs plain-LLM sentence attribution"
    Params: ClassVar[type[AttackParams]] = AsymmetryParams

    def _parts(self, ctx: RunContext) -> tuple[StandardLLM, Generator, Embedder, NLIModel | None]:
        """The plain LLM, the q1 writer, the encoder and the NLI model, all from the run's stack."""
        p: AsymmetryParams = self.params  # type: ignore[assignment]
        stack = ctx.require_stack(f"attack {self.name}")
        decoding = None if p.standard_max_tokens is None else \
            stack.config.decoding.model_copy(update={"max_tokens": p.standard_max_tokens})
        llm = StandardLLM(stack.generator("standard", model=p.standard_model), params=decoding)
        nli = None if p.nli == "none" else stack.nli(p.nli, model=p.standard_model)
        return llm, stack.generator("attacker"), stack.embedder(), nli

    def _probability(self, classifier: AsymmetryClassifier | None, sentences: list[SentenceScore]) -> np.ndarray:
        p: AsymmetryParams = self.params  # type: ignore[assignment]
        if classifier is not None:
            return classifier.predict_proba(sentences)
        if p.scorer == "surprisal":
            return np.array([surprisal_probability(s, p.surprising_tokens) for s in sentences])
        return np.array([(1.0 - s.score) / 2.0 for s in sentences])

    def _threshold(self, classifier: AsymmetryClassifier | None) -> float:
        if classifier is not None or self.params.scorer == "surprisal":
            return 0.5
        return (1.0 - self.params.score_threshold) / 2.0

    def _needs_likelihood(self, classifier: AsymmetryClassifier | None) -> bool:
        p: AsymmetryParams = self.params  # type: ignore[assignment]
        features = FEATURE_SETS[classifier.feature_set if classifier else p.classifier_features]
        uses = classifier is not None or p.train
        # a loaded classifier decides instead of the scorer; with train the scorer decides while querying
        return (classifier is None and p.scorer == "surprisal") or (uses and bool(set(features) & SURPRISAL_FEATURES))

    def execute(self, session: QuerySession, view: CorpusView, ctx: RunContext) -> AttackResult:
        p: AsymmetryParams = self.params  # type: ignore[assignment]
        # the classifier file is checked first: a bad one stops the run before any model or query
        classifier = AsymmetryClassifier.load(p.classifier_path) if p.classifier_path else None
        llm, writer, embedder, nli = self._parts(ctx)
        likelihood = None
        if self._needs_likelihood(classifier):
            if not llm.scores_text:
                raise ConfigError(f"asymmetry: scorer {p.scorer!r} / classifier features need the standard LLM's "
                                  "token log-probabilities, which this model does not give (use a local llama.cpp "
                                  "model, or scorer 'cosine')")
            likelihood = llm.token_logprobs
        threshold = self._threshold(classifier)
        keywords = list(p.keywords) or ([view.topic] if view.topic else [])
        writing = ctx.require_stack(f"attack {self.name}").config.decoding.model_copy(
            update={"max_tokens": WRITER_MAX_TOKENS})
        if keywords:
            mode, initial, from_llm = "single-domain", [make_q1([k]) for k in keywords], 0
        else:
            generated = initial_q1s(writer, p.n_initial, writing.model_copy(
                update={"max_tokens": WRITER_MAX_TOKENS * (p.n_initial + 1)}))
            mode, initial, from_llm = "zero-prior", generated.q1s, generated.from_llm
        records: dict[str, int] = {}

        def ask(q1: str) -> Observation | None:
            query = make_query(q1, p.q2)
            record = session.ask(query)
            if record is None or not record.ok:
                return None
            records[query] = record.index
            return observe(query, record.answer or "", llm.answer(query), embedder, nli, nli_min_cosine=p.nli_min_cosine,
                           likelihood=likelihood)

        def decide(sentences: list[SentenceScore]) -> list[bool]:
            return [bool(x >= threshold) for x in self._probability(classifier, sentences)]

        def refine(private: list[str], hints: list[str]):
            return refine_q1(writer, private, hints, writing)

        reserve = facet_queries(keywords)
        steps = run_refinement(initial, ask, decide, session.remaining, p.keywords_per_refinement, refine, reserve)
        observations, extracted = [], []
        for step in steps:
            if step.observation is None:
                continue
            probs = self._probability(classifier, step.observation.sentences)
            flagged = [s.text for s, f in zip(step.observation.sentences, step.flagged) if f]
            extracted.extend(flagged)
            observations.append({
                "query_index": records[step.observation.query], "q1": step.q1, "refined_to": step.refined_to,
                "refined_by": step.refined_by,
                "llm_answer": step.observation.llm_answer,
                "sentences": [s.to_dict() for s in step.observation.sentences],
                "p_private": [float(x) for x in probs], "flagged": step.flagged,
            })
        state = {"mode": mode, "initial_q1s": list(initial), "initial_from_llm": from_llm,
                 "nli": getattr(nli, "name", "none"), "scorer": p.scorer,
                 "decision": "classifier" if classifier else f"{p.scorer}-threshold",
                 "threshold": threshold, "standard_llm_calls": llm.calls,
                 "refinements": {by: sum(1 for s in steps if s.refined_by == by) for by in ("llm", "template")},
                 "observations": observations}
        return AttackResult(extracted=list(dict.fromkeys(extracted)), state=state)

    def label(self, transcript: Transcript, view: CorpusView) -> Transcript:
        transcript = super().label(transcript, view)
        p: AsymmetryParams = self.params  # type: ignore[assignment]
        by_index = {q.index: q for q in transcript.queries}
        rows = [(obs, by_index[obs["query_index"]]) for obs in transcript.state.get("observations", [])
                if obs["query_index"] in by_index and by_index[obs["query_index"]].trace is not None]
        contexts = {obs["query_index"]: context_passages(record.trace) for obs, record in rows}  # type: ignore[arg-type]
        boilerplate = Boilerplate.from_passages((x for ctx in contexts.values() for x in ctx), p.boilerplate_share)
        labels = []
        for obs, record in rows:
            y = [attribution_label(s["text"], contexts[obs["query_index"]], p.tau, p.min_tokens, boilerplate, record.query)
                 for s in obs["sentences"]]
            labels.append({"query_index": obs["query_index"], "labels": y, "p_private": obs["p_private"]})
        if not any(row["labels"] for row in labels):
            return transcript
        reached = sorted({d for q in transcript.answered for d in (q.retrieved_ids or [])})
        scoring = {"labels": labels, "threshold": transcript.state["threshold"], "documents_reached": reached,
                   "boilerplate_ngrams": len(boilerplate.ngrams)}
        if p.train:
            scoring.update(self._train(transcript, labels))
        transcript.scoring["asymmetry"] = scoring
        return transcript

    def _train(self, transcript: Transcript, labels: list[dict]) -> dict:
        """The paper's protocol: fit on a seeded 7:3 query split, score only the held-out 30%."""
        p: AsymmetryParams = self.params  # type: ignore[assignment]
        sentences = {o["query_index"]: [SentenceScore(**s) for s in o["sentences"]]
                     for o in transcript.state["observations"]}
        observations = [Observation("", "", "", sentences[row["query_index"]], row["labels"])
                        for row in labels if row["labels"]]
        indices = [row["query_index"] for row in labels if row["labels"]]
        if len(observations) < 2:
            return {"classifier": {"error": f"{len(observations)} labelled queries: too few to split"}}
        order = {id(o): i for o, i in zip(observations, indices)}
        train, test = split_by_query(observations, p.test_fraction, transcript.seed)
        try:
            clf = AsymmetryClassifier(feature_set=p.classifier_features, seed=transcript.seed).fit(train)
        except ConfigError as exc:  # one class among the training sentences: reported, scoring untouched
            return {"classifier": {"error": str(exc)}}
        held_out = {order[id(o)]: [float(x) for x in clf.predict_proba(o.sentences)] for o in test}
        info = {"feature_set": p.classifier_features, "train_queries": [order[id(o)] for o in train],
                "test_queries": sorted(held_out), **clf.training}
        if p.classifier_out:
            info["saved_to"] = str(clf.save(p.classifier_out))
        return {"labels": [{**row, "p_private": held_out[row["query_index"]]} for row in labels
                           if row["query_index"] in held_out],
                "threshold": 0.5, "decision": "trained-classifier", "classifier": info}
