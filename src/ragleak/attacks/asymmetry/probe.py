"""One probe of the attack: ask the target and the standard LLM the same Q, score, label.

An ``Observation`` is what one query yields: both answers, the scored RAG sentences and, when
the target exposes its trace (an auditor's oracle), the attribution label of each sentence
(``labels.py``). Observations are the unit of the train/held-out split and of the bootstrap.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ragleak.attacks.asymmetry.labels import attribution_label, context_passages
from ragleak.nlp.nli import NLIModel
from ragleak.attacks.asymmetry.query import StandardLLM
from ragleak.attacks.asymmetry.scoring import Likelihood, SentenceScore, score_answers
from ragleak.rag.embedder import Embedder
from ragleak.records import Trace


@dataclass
class Observation:
    query: str
    rag_answer: str
    llm_answer: str
    sentences: list[SentenceScore]
    labels: list[int] | None = None
    passages: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"query": self.query, "rag_answer": self.rag_answer, "llm_answer": self.llm_answer,
                "sentences": [s.to_dict() for s in self.sentences], "labels": self.labels}


def observe(query: str, rag_answer: str, llm_answer: str, embedder: Embedder, nli: NLIModel | None,
            trace: Trace | None = None, tau: float = 0.5, min_tokens: int = 3,
            nli_min_cosine: float = -1.0, likelihood: Likelihood | None = None) -> Observation:
    """Score the RAG answer against the LLM answer (and, with ``likelihood``, under the standard
    LLM's likelihood); label the sentences when a trace is given."""
    sentences = score_answers(rag_answer, llm_answer, embedder, nli, nli_min_cosine, likelihood, query)
    labels, passages = None, []
    if trace is not None:
        passages = context_passages(trace)
        labels = [attribution_label(s.text, passages, tau, min_tokens) for s in sentences]
    return Observation(query, rag_answer, llm_answer, sentences, labels, passages)


def probe(target, llm: StandardLLM, query: str, embedder: Embedder, nli: NLIModel | None,
          tau: float = 0.5, min_tokens: int = 3) -> Observation:
    """Ask ``target`` (a ``Target``) and ``llm`` the query ``query`` and observe the pair."""
    response = target.answer(query)
    return observe(query, response.answer, llm.answer(query), embedder, nli, response.trace, tau, min_tokens)


def rescore(observation: Observation, embedder: Embedder, nli: NLIModel | None,
            nli_min_cosine: float = -1.0, likelihood: Likelihood | None = None) -> Observation:
    """The same answers and labels scored with another NLI stage (``None``: cosine only) or gate."""
    sentences = score_answers(observation.rag_answer, observation.llm_answer, embedder, nli, nli_min_cosine,
                              likelihood, observation.query)
    return Observation(observation.query, observation.rag_answer, observation.llm_answer, sentences,
                       observation.labels, observation.passages)


def collect(target, llm: StandardLLM, queries: list[str], embedder: Embedder, nli: NLIModel | None,
            tau: float = 0.5, min_tokens: int = 3) -> list[Observation]:
    """``probe`` every query in order (an auditor's labelled data set for training/evaluation)."""
    return [probe(target, llm, q, embedder, nli, tau, min_tokens) for q in queries]
