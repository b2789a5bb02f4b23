"""Neighbouring corpora that stress each assumption a DP card relies on.

A scenario is a pair of passage sets (D, D') that differ in one document, the query both are
asked, and the documents whose use the events watch. Scores are designed (``embedding``) and
sized against the pipeline's pool (``candidate_k``) and selection size (``top_k``):

* ``contested``: X (one passage) and exactly ``top_k`` fillers, all at the top of the score range
  [0, 1] in D; in D' X is at the bottom. The fillers' noisy maximum then almost always lies above
  X's unnoised score in both worlds, so "X ranks first (or second)" is a tail event of X's own
  noise, whose ratio is the full e^eps of the mechanism (measured: 1.96 of a true 2 for Laplace
  top-5, where fillers at 0.5 show 1.83);
* ``single``: the differing document X is one passage at the top score; the fillers sit just
  below it, so X is selected without noise and the noise decides at the margin;
* ``multi-chunk``: X spans two passages (a document longer than one chunk), both at the top;
* ``pool-edge``: the pool is full of fillers and Y sits just outside it; the neighbour changes a
  pool document Z, which lets Y into (or keeps it out of) any pool of ``candidate_k``;
* ``near-duplicate``: X and a near-duplicate X2 (another document, almost the same text) are both
  at the top;
* ``chunk-count``: X spans 3 passages at the top and its substitute is a single passage, also at
  the top: the document's score is unchanged but its passage count is not, so a mechanism that
  noises passages while its card claims documents shows "2 or more passages of X", impossible on
  D' (substitution only: add/remove of a multi-passage document is ``multi-chunk``).

Each comes in two adjacencies: ``substitution`` (X keeps its id, its content changes to an
irrelevant text scored 0) and ``add-remove`` (D' lacks X). ``budgeted`` asks the single pair T
times per trial spread over k principals (client ids), for cards with a per-principal budget.
The private document carries the scripted decoder's marker fact, so a generation-side
mechanism's voters see it exactly when it reaches their context.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ragleak.errors import ConfigError
from ragleak.records import Passage
from ragleak.verify.scripted import MARKER

Adjacency = Literal["substitution", "add-remove"]
STRESSES = ("contested", "single", "multi-chunk", "pool-edge", "near-duplicate", "chunk-count")
QUERY = "What does the record say about the audited person?"


class DesignedPassage(BaseModel):
    model_config = ConfigDict(frozen=True)

    passage: Passage
    score: float = Field(ge=-1.0, le=1.0)


class Scenario(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    stress: str
    adjacency: Adjacency
    description: str
    query: str = QUERY
    world: list[DesignedPassage] = Field(description="D")
    neighbour: list[DesignedPassage] = Field(description="D'")
    focus: list[str] = Field(description="documents whose use the events count")
    queries: int = Field(default=1, ge=1, description="T: queries per trial (one conversation each)")
    principals: int = Field(default=0, ge=0, description=(
        "k: the T queries go round-robin to k client ids (colluding principals); 0: no id is named"))

    def max_chunks(self, doc_id: str) -> int:
        return max(sum(d.passage.doc_id == doc_id for d in w) for w in (self.world, self.neighbour))


def _passage(doc_id: str, chunk: int, text: str, score: float) -> DesignedPassage:
    return DesignedPassage(passage=Passage(id=f"{doc_id}#{chunk}", doc_id=doc_id, text=text), score=score)


def _fillers(n: int, high: float = 0.99, low: float = 0.8, start: int = 0) -> list[DesignedPassage]:
    scores = np.linspace(high, low, n) if n > 1 else np.array([high])
    return [_passage(f"filler-{start + i:03d}", 0, f"Filler record {start + i}: an ordinary public entry.", float(s))
            for i, s in enumerate(scores)]


def _private(doc_id: str, chunks: int, score: float, variant: str = "") -> list[DesignedPassage]:
    return [_passage(doc_id, c, f"Record {doc_id}{variant} part {c}: {MARKER} the audited person's private detail.",
                     score - 0.005 * c) for c in range(chunks)]


def _substitute(doc_id: str, chunks: int) -> list[DesignedPassage]:
    return [_passage(doc_id, c, f"Record {doc_id} part {c}: an unrelated public note.", 0.0) for c in range(chunks)]


def build_scenarios(candidate_k: int, top_k: int, stresses: tuple[str, ...] = STRESSES,
                    adjacencies: tuple[Adjacency, ...] = ("substitution", "add-remove")) -> list[Scenario]:
    """Every (stress, adjacency) pair, sized to a pool of ``candidate_k`` and a selection of ``top_k``."""
    if candidate_k < top_k or top_k < 1 or candidate_k < 3:
        raise ConfigError("need candidate_k >= top_k >= 1 and candidate_k >= 3")
    unknown = set(stresses) - set(STRESSES)
    if unknown:
        raise ConfigError(f"unknown stresses {sorted(unknown)}; known: {', '.join(STRESSES)}")
    out = []
    for stress in stresses:
        for adjacency in adjacencies:
            if stress == "chunk-count" and adjacency == "add-remove":
                continue  # removing a multi-passage document is the multi-chunk pair
            out.append(_scenario(stress, adjacency, candidate_k, top_k))
    return out


def _neighbour(world: list[DesignedPassage], doc_id: str, adjacency: Adjacency) -> list[DesignedPassage]:
    kept = [d for d in world if d.passage.doc_id != doc_id]
    if adjacency == "add-remove":
        return kept
    chunks = sum(d.passage.doc_id == doc_id for d in world)
    return kept + _substitute(doc_id, chunks)


def _scenario(stress: str, adjacency: Adjacency, pool: int, top_k: int) -> Scenario:
    change = "substituted by an irrelevant text" if adjacency == "substitution" else "removed"
    if stress == "contested":
        world = _private("doc-x", 1, 1.0) + _fillers(top_k, high=1.0, low=1.0)
        return Scenario(name=f"contested/{adjacency}", stress=stress, adjacency=adjacency, world=world,
                        neighbour=_neighbour(world, "doc-x", adjacency), focus=["doc-x"],
                        description=f"document X ties {top_k} fillers at the top score ({top_k} slots); X {change}")
    if stress == "single":
        world = _private("doc-x", 1, 1.0) + _fillers(pool - 1)
        return Scenario(name=f"single/{adjacency}", stress=stress, adjacency=adjacency, world=world,
                        neighbour=_neighbour(world, "doc-x", adjacency), focus=["doc-x"],
                        description=f"one-passage document X at the top of a full pool, {change}")
    if stress == "multi-chunk":
        world = _private("doc-x", 2, 1.0) + _fillers(pool - 2)
        return Scenario(name=f"multi-chunk/{adjacency}", stress=stress, adjacency=adjacency, world=world,
                        neighbour=_neighbour(world, "doc-x", adjacency), focus=["doc-x"],
                        description=f"document X split into 2 passages, both at the top, {change}")
    if stress == "pool-edge":
        # Z is a pool document; Y is first in line outside a pool of candidate_k passages
        world = (_private("doc-z", 1, 0.995) + _fillers(pool - 1)
                 + [_passage("doc-y", 0, "Record doc-y: the document just outside the pool.", 0.7)]
                 + _fillers(4, high=0.05, low=0.0, start=pool))
        return Scenario(name=f"pool-edge/{adjacency}", stress=stress, adjacency=adjacency, world=world,
                        neighbour=_neighbour(world, "doc-z", adjacency), focus=["doc-y", "doc-z"],
                        description=(f"{pool} pool passages and document Y just outside them; pool document Z "
                                     f"{change}, which moves Y into a pool of candidate_k={pool}"))
    if stress == "near-duplicate":
        world = _private("doc-x", 1, 1.0) + _private("doc-x2", 1, 0.999, variant=" (copy)") + _fillers(pool - 2)
        return Scenario(name=f"near-duplicate/{adjacency}", stress=stress, adjacency=adjacency, world=world,
                        neighbour=_neighbour(world, "doc-x", adjacency), focus=["doc-x", "doc-x2"],
                        description=f"document X and a near-duplicate X2 (another document) at the top; X {change}")
    if stress == "chunk-count":
        world = _private("doc-x", 3, 1.0) + _fillers(pool - 3)
        shorter = [_passage("doc-x", 0, "Record doc-x part 0: a one-passage public note.", 1.0)]
        return Scenario(name=f"chunk-count/{adjacency}", stress=stress, adjacency=adjacency, world=world,
                        neighbour=[d for d in world if d.passage.doc_id != "doc-x"] + shorter, focus=["doc-x"],
                        description="document X of 3 passages at the top substituted by a 1-passage text, also "
                                    "at the top (same document score, different passage count)")
    raise ConfigError(f"unknown stress {stress!r}")


def budgeted(scenario: Scenario, queries: int, principals: int) -> Scenario:
    """The pair asked ``queries`` times per trial, round-robin over ``principals`` client ids
    (k colluding accounts; 0: no id named, the anonymous budget)."""
    who = f"{principals} colluding principal{'s' if principals != 1 else ''}" if principals else "no principal"
    return scenario.model_copy(update={"name": f"{scenario.name} x{queries} queries, {who}", "queries": queries,
                                       "principals": principals, "stress": "budget"})


def repeated(scenario: Scenario, queries: int) -> Scenario:
    """The same pair asked ``queries`` times per trial, each a new conversation (empty history):
    what an adversary who opens new conversations spends, against the card's eps(T)."""
    return scenario.model_copy(update={"name": f"{scenario.name} x{queries} queries", "queries": queries})
