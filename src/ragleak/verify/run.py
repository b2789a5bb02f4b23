"""``verify_defense``: run a defense's real hooks on neighbouring corpora and bound its epsilon.

Each trial is a fresh copy of the defense (its state as configured, before any query), a fresh
target (``pipeline.build_target``: the real ``RAGPipeline``) over the scenario's real FAISS index
(``embedding.DesignedEmbedder``) and a fresh seed, asked the scenario's query T times, each as a
new conversation. What the trial observes is what the card's boundary covers:

* ``retrieved-ids``: how many of the T contexts' passages came from each watched document;
* ``answers``: the first token of each answer, generated through the defense's own ``generate``
  over ``scripted.ScriptedDecoder``'s distribution; ``answers+citations``: both of the above;
* ``synthetic-corpus``: whether each word of a watched document reached the T prompts.

Events are "feature >= j" for every feature and j up to its most possible count, declared from
the scenario before any trial runs. ``result`` turns the counts into Clopper-Pearson lower bounds
on epsilon, Bonferroni-adjusted over every event of the run, against the card's eps(T).
"""

from __future__ import annotations

import copy
import logging
import re
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Literal

from ragleak.accounting.composition import DEFAULT_DELTA, epsilon_after
from ragleak.accounting.group import group_epsilon
from ragleak.accounting.guarantee import Guarantee
from ragleak.config import StackConfig
from ragleak.context import RunContext
from ragleak.defenses import DEFENSES, Defense
from ragleak.errors import ConfigError
from ragleak.pipeline.build import build_target
from ragleak.rag.index import PassageIndex
from ragleak.records import Passage, Trace
from ragleak.testing import tiny_stack
from ragleak.verify.embedding import DesignedEmbedder
from ragleak.verify.result import Claim, EventResult, ScenarioResult, VerifyReport, ceiling, event_lower_bound
from ragleak.verify.scenarios import STRESSES, Scenario, build_scenarios, repeated
from ragleak.verify.scripted import VOCABULARY, ScriptedDecoder, ScriptedLlamaGenerator

log = logging.getLogger(__name__)

_WORD = re.compile(r"[a-z]+")


@dataclass(frozen=True)
class VerifySettings:
    trials: int = 2000
    alpha: float = 0.05
    seed: int = 0
    top_k: int = 5
    candidate_k: int = 20
    stresses: tuple[str, ...] = STRESSES
    #: which neighbouring pairs to run: both, or only the card's own adjacency ("card")
    adjacencies: Literal["both", "card"] = "both"
    #: also ask the single-document pair this many times per trial (0: per-query test only)
    queries: int = 0
    delta: float = DEFAULT_DELTA

    def __post_init__(self) -> None:
        if self.trials < 1:
            raise ConfigError("trials must be >= 1")
        if not 0.0 < self.alpha < 1.0:
            raise ConfigError("alpha must be in (0, 1)")
        if self.queries < 0:
            raise ConfigError("queries must be >= 0")


@dataclass
class _Plan:
    scenario: Scenario
    features: dict[str, int] = field(default_factory=dict)  # feature -> the largest count it can reach
    applicable: bool = True
    reason: str = ""
    claim: Claim | None = None


def claimed_adjacency(guarantee: Guarantee) -> tuple[str, str]:
    """(adjacency, where it came from): the card's own slot when it has one, else its notes, else
    inferred (selection of identities is only meaningful under substitution)."""
    for holder in (guarantee, guarantee.unit, guarantee.scope):
        value = getattr(holder, "adjacency", None)
        if isinstance(value, str) and value:
            return ("substitution" if "sub" in value.lower() else "add-remove"), "card"
    notes = guarantee.notes.lower()
    if "substitution" in notes:
        return "substitution", "card notes"
    if "add/remove" in notes or "add-remove" in notes:
        return "add-remove", "card notes"
    if guarantee.boundary == "retrieved-ids":
        return "substitution", "inferred (the card does not say; a selection of identities needs substitution)"
    return "add-remove", "inferred (the card does not say; add/remove is the common reading)"


def claim_for(guarantee: Guarantee, queries: int, scenario_adjacency: str, card_adjacency: str,
              delta: float) -> tuple[Claim | None, str]:
    """The card's (eps, delta) after ``queries`` queries on its own boundary, converted to the
    scenario's adjacency; None with the reason when the card says nothing about this pair."""
    if not guarantee.is_formal:
        return None, "no formal guarantee"
    eps = epsilon_after(guarantee, queries, method="tight", delta=delta)
    if eps.void:
        return None, f"card void: {eps.reason}"
    if scenario_adjacency == card_adjacency:
        return Claim(eps=eps.eps, delta=eps.delta, queries=queries), ""
    if card_adjacency == "add-remove":
        # a substitution is a removal and an addition: group privacy with 2 documents
        e2, d2 = group_epsilon(eps.eps, eps.delta, 2)
        return Claim(eps=e2, delta=d2, queries=queries,
                     note=f"add/remove claim ({eps.eps:.4g}, {eps.delta:.3g}) doubled for a substitution"), ""
    return None, "outside the claim (substitution adjacency)"


def _features(scenario: Scenario, boundary: str) -> dict[str, int]:
    t = scenario.queries
    ids = {f"{doc} passages": t * scenario.max_chunks(doc) for doc in scenario.focus}
    if boundary == "retrieved-ids":
        return ids
    if boundary == "synthetic-corpus":
        # words only the watched documents have (not the query's, which every prompt holds)
        others = {w for d in scenario.world + scenario.neighbour if d.passage.doc_id not in scenario.focus
                  for w in _WORD.findall(d.passage.text.lower())} | set(_WORD.findall(scenario.query.lower()))
        words = sorted({w for d in scenario.world + scenario.neighbour if d.passage.doc_id in scenario.focus
                        for w in _WORD.findall(d.passage.text.lower()) if len(w) > 2} - others)
        return {f"word {w!r} in context": t for w in words}
    answers = {f"first token {v or 'none'}": t for v in (*VOCABULARY[1:], "")}
    # a claim on answers plus citations covers which documents were used as well
    return {**answers, **ids} if boundary == "answers+citations" else answers


def _observe(traces: list[Trace], boundary: str, features: dict[str, int]) -> Counter:
    seen: Counter = Counter()
    for trace in traces:
        if boundary in ("retrieved-ids", "answers+citations"):
            for item in trace.context:
                seen[f"{item.doc_id} passages"] += 1
        if boundary == "synthetic-corpus":
            words = set(_WORD.findall(trace.prompt.lower()))
            for name in features:
                if name.split("'")[1] in words:
                    seen[name] += 1
        elif boundary != "retrieved-ids":
            first = trace.answer.split()[0] if trace.answer.split() else ""
            seen[f"first token {first or 'none'}"] += 1
    return seen


def _index(scenario: Scenario, passages: list[Passage], scores: dict[str, float]) -> PassageIndex:
    return PassageIndex.build(passages, DesignedEmbedder(scenario.query, scores), {"verify": scenario.name})


def _prototype(defense_cls: type[Defense], params: dict) -> Defense:
    proto = defense_cls(**params)
    if proto.overrides("generate") and hasattr(proto, "_decoder"):
        # generation-side voting defenses keep their decoder here (``decoder_for`` reuses it when
        # the generator names its model path): the scripted distribution replaces llama.cpp
        proto._decoder = ScriptedDecoder()
    return proto


def _run_world(proto: Defense, index: PassageIndex, scenario: Scenario, settings: VerifySettings,
               seeds: range, boundary: str, features: dict[str, int]) -> tuple[list[Counter], Guarantee]:
    """The observations of every trial, and the guarantee the defense states after serving this
    corpus (a card may depend on it, e.g. void when the corpus outgrows a pool)."""
    # the target model is the scripted distribution, uncached: every trial generates afresh
    stack = tiny_stack(config=StackConfig(n_threads=1, top_k=settings.top_k, candidate_k=settings.candidate_k),
                       target=ScriptedLlamaGenerator())
    out, defense = [], proto
    for seed in seeds:
        defense = copy.deepcopy(proto)
        target = build_target(stack, index, defense, ctx=RunContext(seed=seed))
        traces = [target.answer(scenario.query).trace for _ in range(scenario.queries)]
        out.append(_observe(traces, boundary, features))
    return out, defense.guarantee()


def verify_defense(defense: str | type[Defense], params: dict | None = None,
                   settings: VerifySettings | None = None,
                   progress: Callable[[str], None] | None = None) -> VerifyReport:
    """Run every scenario on ``defense`` (a registered name or a ``Defense`` class) and report,
    per event, p(D), p(D') and the epsilon lower bound against the card's claim."""
    settings = settings or VerifySettings()
    with _one_search_thread():
        return _verify(defense, dict(params or {}), settings, progress)


@contextmanager
def _one_search_thread():
    """FAISS searches one query at a time here; its OpenMP team costs ~10x the search itself on a
    busy machine (measured: 18 ms against 2 ms per trial on 2 shared cores)."""
    import faiss

    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


def _verify(defense: str | type[Defense], params: dict, settings: VerifySettings,
            progress: Callable[[str], None] | None) -> VerifyReport:
    defense_cls = DEFENSES.get(defense) if isinstance(defense, str) else defense
    t0 = time.perf_counter()
    proto = _prototype(defense_cls, params)
    guarantee = proto.guarantee()
    boundary = guarantee.boundary
    adjacency, adjacency_source = claimed_adjacency(guarantee)
    scenarios = build_scenarios(settings.candidate_k, settings.top_k, settings.stresses,
                                ("substitution", "add-remove") if settings.adjacencies == "both" else (adjacency,))
    if settings.queries > 1:
        scenarios += [repeated(s, settings.queries) for s in scenarios
                      if s.stress == "single" and s.adjacency == adjacency]
    plans = []
    for scenario in scenarios:
        claim, reason = claim_for(guarantee, scenario.queries, scenario.adjacency, adjacency, settings.delta)
        plans.append(_Plan(scenario, _features(scenario, boundary), claim is not None, reason, claim))
    n_events = max(1, sum(sum(plan.features.values()) for plan in plans if plan.applicable))
    results = []
    for number, plan in enumerate(plans):
        results.append(_run_plan(plan, proto, settings, boundary, n_events, number))
        if progress is not None:
            progress(f"{plan.scenario.name}: max eps_lb {results[-1].max_eps_lb:.3g}")
    violations = [f"{r.name}: eps_lb {r.max_eps_lb:.3g} > claimed {r.claim.eps:.3g} "
                  f"(event {max(r.events, key=lambda e: e.eps_lb).event})"
                  for r in results if r.violated and r.claim is not None]
    applicable = [r for r in results if r.applicable]
    return VerifyReport(
        defense=defense_cls.name, version=defense_cls.version, params=proto.params.model_dump(mode="json"),
        boundary=guarantee.boundary, adjacency=adjacency, adjacency_source=adjacency_source, trials=settings.trials,
        alpha=settings.alpha, bounds=4 * n_events, ceiling=ceiling(settings.trials, settings.alpha, n_events),
        top_k=settings.top_k, candidate_k=settings.candidate_k, seed=settings.seed, scenarios=results,
        max_eps_lb=max((r.max_eps_lb for r in applicable), default=0.0), violated=bool(violations),
        violations=violations, seconds=round(time.perf_counter() - t0, 3))


def _run_plan(plan: _Plan, proto: Defense, settings: VerifySettings, boundary: str, n_events: int,
              number: int) -> ScenarioResult:
    s = plan.scenario
    base = dict(name=s.name, stress=s.stress, adjacency=s.adjacency, description=s.description, queries=s.queries)
    if not plan.applicable or plan.claim is None:
        return ScenarioResult(**base, applicable=False, reason=plan.reason)
    t0 = time.perf_counter()
    scores = {d.passage.text: d.score for d in s.world + s.neighbour}
    n = settings.trials
    # disjoint seeds per scenario and world: trials are independent within a world
    start = settings.seed * 1_000_003 + number * 2 * n
    runs = [_run_world(proto, _index(s, [d.passage for d in w], scores), s, settings, range(a, a + n), boundary,
                       plan.features)
            for w, a in ((s.world, start), (s.neighbour, start + n))]
    worlds = [observations for observations, _ in runs]
    claim = plan.claim
    for _, stated in runs:
        if stated != proto.guarantee():
            # the card as the defense states it after serving this corpus: the most lenient one
            restated, reason = claim_for(stated, s.queries, s.adjacency, claimed_adjacency(stated)[0], settings.delta)
            if restated is None:
                return ScenarioResult(**base, applicable=False, reason=f"on this corpus: {reason}",
                                      seconds=round(time.perf_counter() - t0, 3))
            if restated.eps > claim.eps:
                claim = restated.model_copy(update={"note": f"stated after serving the corpus; {restated.note}"})
    events = []
    for feature, top in plan.features.items():
        for j in range(1, top + 1):
            k_w = sum(obs[feature] >= j for obs in worlds[0])
            k_n = sum(obs[feature] >= j for obs in worlds[1])
            lb = event_lower_bound(k_w, n, k_n, n, delta=claim.delta, alpha=settings.alpha, events=n_events)
            events.append(EventResult(event=f"{feature} >= {j}", k_world=k_w, k_neighbour=k_n, n_world=n,
                                      n_neighbour=n, p_world=k_w / n, p_neighbour=k_n / n, eps_lb=lb))
    worst = max((e.eps_lb for e in events), default=0.0)
    return ScenarioResult(**base, applicable=True, claim=claim, events=events, max_eps_lb=worst,
                          violated=worst > claim.eps, seconds=round(time.perf_counter() - t0, 3))
