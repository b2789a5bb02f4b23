"""``verify_defense``: run a defense's real hooks on neighbouring corpora and judge its card.

Each trial is a fresh copy of the defense (its state as configured, before any query), a fresh
target (``pipeline.build_target``: the real ``RAGPipeline``) over the scenario's real FAISS index
(``embedding.DesignedEmbedder``) and a fresh seed, asked the scenario's query T times, each as a
new conversation (round-robin over k client ids in the budget scenarios). Per query the trial
records what the card's boundary covers:

* ``retrieved-ids``: the context positions of the watched documents' passages;
* ``answers``: the answer, generated through the defense's own ``generate`` over
  ``scripted.ScriptedDecoder``'s distribution; ``answers+citations``: both of the above;
* ``synthetic-corpus``: which words only a watched document has reached the prompt.

Plans. Every (stress, adjacency) scenario on the card's claim eps(T); for a card with a budget
(``max_queries``) the contested pair asked (k + 4) N times by k colluding principals, k in
``colluders``, against eps(k N) (the card's line for k colluders); for a generation-side defense
with ``max_new_tokens`` the single pair again at ``max_new_tokens=1`` (the per-token claim).
The claim is the card the defense states after serving each corpus (the more lenient of the two;
void on either: the scenario is void).

Power and error control (``events``, ``result``). A claim at or above the ceiling of ``trials``
is reported inconclusive without running. The others run in sequential looks (1/8, 1/4, 1/2 and
all of ``trials``, spending 10/15/25/50% of the scenario's alpha; with a planned maximum past
``trials``, ``max_trials``, default 4x: 10/15/20/25% there and 30% over the extension looks at
2x, 4x, ...); at each look the events are chosen on the first 30% of the trials so far and
certified on the rest, at alpha / (scenarios tested) * (look's share) / (events certified). The
schedule is fixed before any trial: a look that does not run (its scenario decided, or the CPU
budget ``extend_cpu_seconds`` spent: extension looks go to the undecided scenarios in order of
promise, each only when its projected cost fits) leaves its share unspent, which can only lower
the chance of a broken verdict. A scenario stops at the first look that certifies an event above
the claim (broken), or, before the last look, when every chosen event's estimated log ratio is
FUTILITY_Z standard errors below the claim (holds: the rule can only lower the chance of a
broken verdict, so the error control stands; it applies from FUTILITY_MIN_TRIALS trials per
world).
"""

from __future__ import annotations

import copy
import logging
import math
import re
import time
import zlib
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Literal

from ragleak.accounting.composition import DEFAULT_DELTA, epsilon_after
from ragleak.accounting.group import group_epsilon
from ragleak.accounting.guarantee import Guarantee, PerResponse
from ragleak.config import StackConfig
from ragleak.context import RunContext
from ragleak.defenses import Defense, defense_class
from ragleak.errors import ConfigError
from ragleak.pipeline.build import build_target
from ragleak.rag.index import PassageIndex
from ragleak.records import Passage, Trace
from ragleak.testing import tiny_stack
from ragleak.verify import events as ev
from ragleak.verify.one_run import guess_bound, guess_ceiling
from ragleak.verify.embedding import DesignedEmbedder
from ragleak.verify.result import (EXIT_CODES, Claim, EventResult, ScenarioResult, Verdict, VerifyReport, broken_line,
                                   combine, holds_line, inconclusive_line, void_line)
from ragleak.verify.scenarios import STRESSES, Scenario, budgeted, build_scenarios, repeated
from ragleak.verify.scripted import ScriptedDecoder, ScriptedLlamaGenerator

log = logging.getLogger(__name__)

_WORD = re.compile(r"[a-z]+")
#: sequential looks: share of the trials, and share of the scenario's alpha spent there
LOOKS = ((0.125, 0.1), (0.25, 0.15), (0.5, 0.25), (1.0, 0.5))
#: ... when the plan goes on past ``trials`` (``max_trials``): the base looks spend this, and the
#: extension looks (2x, 4x, ... ``trials``, then ``max_trials``) share EXTENSION_SPEND evenly
LOOKS_EXTENDED = ((0.125, 0.1), (0.25, 0.15), (0.5, 0.2), (1.0, 0.25))
EXTENSION_SPEND = 0.3
#: the planned maximum when ``max_trials`` is not given: this many times ``trials``
EXTEND = 4
#: a look stops a scenario as holding when every chosen event's log ratio is below the claim by
#: this many standard errors (futility: it can only lower the chance of a broken verdict)
FUTILITY_Z = 3.0
#: ... and only from this many trials per world on (fewer select events too coarse to trust)
FUTILITY_MIN_TRIALS = 1000
COLLUDERS = (1, 2, 4, 8)
#: k colluders with a budget of N queries each ask (k + BUDGET_EXTRA) N: enough past their budgets
#: that a defense answering them all shows a loss well above eps(k N)
BUDGET_EXTRA = 4


@dataclass(frozen=True)
class VerifySettings:
    trials: int = 10000
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
    #: wall-clock budget of the whole run; a scenario still running when its share is spent
    #: stops at its last look and reads inconclusive
    max_seconds: float = 600.0
    #: k colluding principals for cards with a budget (empty: no budget scenarios)
    colluders: tuple[int, ...] = COLLUDERS
    #: for a defense with max_new_tokens: also test the per-token claim at max_new_tokens=1
    per_token: bool = True
    #: stop the run at the first look that finds a broken scenario (the rest read inconclusive)
    stop_when_broken: bool = True
    #: the planned maximum trials per world (None: EXTEND x trials; = trials: no extension). A
    #: scenario still undecided at ``trials`` goes on to looks at 2x, 4x, ... trials, the most
    #: promising first, while the run's CPU time allows (the alpha of those looks is fixed here,
    #: before any trial; a look that does not run leaves its share unspent)
    max_trials: int | None = None
    #: CPU seconds of the whole run (one core) after which no extension look starts, nor one
    #: whose projected cost would end past it
    extend_cpu_seconds: float = 300.0

    def __post_init__(self) -> None:
        if self.trials < 4:
            raise ConfigError("trials must be >= 4 (events are chosen on some trials and certified on others)")
        if not 0.0 < self.alpha < 1.0:
            raise ConfigError("alpha must be in (0, 1)")
        if self.queries < 0:
            raise ConfigError("queries must be >= 0")
        if self.max_seconds <= 0:
            raise ConfigError("max_seconds must be > 0")
        if any(k < 1 for k in self.colluders):
            raise ConfigError("colluders must be >= 1")
        if self.max_trials is not None and self.max_trials < self.trials:
            raise ConfigError("max_trials must be >= trials")
        if self.extend_cpu_seconds < 0:
            raise ConfigError("extend_cpu_seconds must be >= 0")

    @property
    def planned_max(self) -> int:
        return EXTEND * self.trials if self.max_trials is None else self.max_trials

    def base_trials(self) -> int:
        """The look at ``trials``: where a scenario is judged when it is not extended."""
        return max(4, self.trials)

    def looks(self) -> list[int]:
        return sorted(self.look_shares())

    def extension_looks(self) -> list[int]:
        return [n for n in self.looks() if n > self.base_trials()]

    def look_shares(self) -> dict[int, float]:
        """Trials per world at each look and the share of a scenario's alpha spent there (looks
        that coincide at a small ``trials`` pool their shares)."""
        top = max(self.base_trials(), self.planned_max)
        extension, n = [], self.base_trials()
        while n < top:
            n = min(2 * n, top)
            extension.append(n)
        out: dict[int, float] = {}
        for share, spend in (LOOKS_EXTENDED if extension else LOOKS):
            n = max(4, math.ceil(share * self.trials))
            out[n] = out.get(n, 0.0) + spend
        for n in extension:
            out[n] = EXTENSION_SPEND / len(extension)
        return out


@dataclass
class _Plan:
    scenario: Scenario
    proto: Defense
    claim: Claim | None = None
    applicable: bool = True
    reason: str = ""
    void: bool = False


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


def charged_queries(guarantee: Guarantee, queries: int, principals: int) -> int:
    """The queries the card charges when ``queries`` are spread over ``principals`` client ids:
    a per-principal budget of N answers at most k N of them (k colluders' line)."""
    scope = guarantee.scope
    if isinstance(scope, PerResponse) and scope.max_queries and scope.budget_scope == "principal":
        return min(queries, max(1, principals) * scope.max_queries)
    return queries


def claim_for(guarantee: Guarantee, queries: int, scenario_adjacency: str, card_adjacency: str,
              delta: float, principals: int = 0) -> tuple[Claim | None, str]:
    """The card's (eps, delta) after ``queries`` queries on its own boundary, converted to the
    scenario's adjacency; None with the reason when the card says nothing about this pair."""
    if not guarantee.is_formal:
        return None, "no formal guarantee"
    charged = charged_queries(guarantee, queries, principals)
    eps = epsilon_after(guarantee, charged, method="tight", delta=delta)
    if eps.void:
        return None, f"card void: {eps.reason}"
    note = f"{principals} principal(s) charged {charged} of {queries} queries" if charged != queries else ""
    if scenario_adjacency == card_adjacency:
        return Claim(eps=eps.eps, delta=eps.delta, queries=queries, note=note), ""
    if card_adjacency == "add-remove":
        # a substitution is a removal and an addition: group privacy with 2 documents
        e2, d2 = group_epsilon(eps.eps, eps.delta, 2)
        return Claim(eps=e2, delta=d2, queries=queries,
                     note=f"add/remove claim ({eps.eps:.4g}, {eps.delta:.3g}) doubled for a substitution"), ""
    return None, "outside the claim (substitution adjacency)"


def _watched_words(scenario: Scenario) -> frozenset[str]:
    # words only the watched documents have (not the query's, which every prompt holds)
    others = {w for d in scenario.world + scenario.neighbour if d.passage.doc_id not in scenario.focus
              for w in _WORD.findall(d.passage.text.lower())} | set(_WORD.findall(scenario.query.lower()))
    return frozenset({w for d in scenario.world + scenario.neighbour if d.passage.doc_id in scenario.focus
                      for w in _WORD.findall(d.passage.text.lower()) if len(w) > 2} - others)


def _ids(context: list, focus: list[str]) -> tuple:
    return tuple((item.doc_id, pos) for pos, item in enumerate(context) if item.doc_id in focus)


def _observe(trace: Trace, boundary: str, focus: list[str], words: frozenset[str]):
    """What one query shows on the claim's boundary, as a hashable value."""
    ids = _ids(trace.context, focus)
    if boundary == "synthetic-corpus":
        return tuple(sorted(words & set(_WORD.findall(trace.prompt.lower()))))
    return (trace.answer, ids) if boundary == "answers+citations" else trace.answer


def _prototype(defense_cls: type[Defense], params: dict) -> Defense:
    proto = defense_cls(**params)
    if proto.overrides("generate") and hasattr(proto, "_decoder"):
        # generation-side voting defenses keep their decoder here (``decoder_for`` reuses it when
        # the generator names its model path): the scripted distribution replaces llama.cpp
        proto._decoder = ScriptedDecoder()
    return proto


class _World:
    """One corpus of a scenario: its index and the trials run on it so far (observations)."""

    def __init__(self, proto: Defense, scenario: Scenario, passages: list[Passage], scores: dict[str, float],
                 settings: VerifySettings, first_seed: int, boundary: str) -> None:
        self.proto, self.scenario, self.boundary, self.first_seed = proto, scenario, boundary, first_seed
        self.index = PassageIndex.build(passages, DesignedEmbedder(scenario.query, scores), {"verify": scenario.name})
        # the target model is the scripted distribution, uncached: every trial generates afresh
        self.stack = tiny_stack(config=StackConfig(n_threads=1, top_k=settings.top_k,
                                                   candidate_k=settings.candidate_k),
                                target=ScriptedLlamaGenerator())
        self.words = _watched_words(scenario) if boundary == "synthetic-corpus" else frozenset()
        self.trials: list[ev.Trial] = []

    def _trial(self, seed: int) -> tuple[ev.Trial, Defense]:
        defense = copy.deepcopy(self.proto)
        pipeline = build_target(self.stack, self.index, defense, ctx=RunContext(seed=seed)).pipeline
        s, out = self.scenario, []
        for q in range(s.queries):
            principal = f"principal-{q % s.principals}" if s.principals else None
            if self.boundary == "retrieved-ids":
                # the selection is all the claim covers: the pipeline's retrieval steps, no generation
                out.append(_ids(pipeline.retrieve(s.query, (), principal).context, s.focus))
            else:
                out.append(_observe(pipeline.answer(s.query, (), principal).trace, self.boundary, s.focus, self.words))
        return tuple(out), defense

    def stated(self) -> Guarantee:
        """The card the defense states after serving this corpus (one query, not a trial)."""
        return self._trial(self.first_seed - 1)[1].guarantee()

    def extend(self, n: int, deadline: float) -> bool:
        """Run trials up to n; False when the deadline passed first."""
        while len(self.trials) < n:
            if time.perf_counter() > deadline:
                return False
            self.trials.append(self._trial(self.first_seed + len(self.trials))[0])
        return True


def verify_defense(defense: str | type[Defense], params: dict | None = None,
                   settings: VerifySettings | None = None,
                   progress: Callable[[str], None] | None = None) -> VerifyReport:
    """Run every scenario on ``defense`` (a registered name, ``path/file.py:Class`` or a
    ``Defense`` class) and judge its card: holds, broken, inconclusive or void."""
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


def _plans(defense_cls: type[Defense], params: dict, settings: VerifySettings, adjacency: str) -> list[_Plan]:
    proto = _prototype(defense_cls, params)
    guarantee = proto.guarantee()
    scenarios = build_scenarios(settings.candidate_k, settings.top_k, settings.stresses,
                                ("substitution", "add-remove") if settings.adjacencies == "both" else (adjacency,))
    singles = build_scenarios(settings.candidate_k, settings.top_k, ("single",), (adjacency,))
    # the budget lines ask the contested pair, where each query's observation carries the most of
    # its loss, so T queries' losses add up to something a finite test can see
    contested = build_scenarios(settings.candidate_k, settings.top_k, ("contested",), (adjacency,))
    plans = [_Plan(s, proto) for s in scenarios]
    if settings.queries > 1:
        plans += [_Plan(repeated(s, settings.queries), proto) for s in singles]
    scope = guarantee.scope
    if isinstance(scope, PerResponse) and scope.max_queries:
        n = scope.max_queries
        plans += [_Plan(budgeted(s, (k + BUDGET_EXTRA) * n, k), proto) for s in contested for k in settings.colluders]
    tokens = getattr(proto.params, "max_new_tokens", None)
    if settings.per_token and isinstance(tokens, int) and tokens > 1:
        per_token = _prototype(defense_cls, {**params, "max_new_tokens": 1})
        plans += [_Plan(s.model_copy(update={"name": f"{s.name} per token (max_new_tokens=1)"}), per_token)
                  for s in singles]
    return plans


def _verify(defense: str | type[Defense], params: dict, settings: VerifySettings,
            progress: Callable[[str], None] | None) -> VerifyReport:
    defense_cls = defense_class(defense) if isinstance(defense, str) else defense
    t0 = time.perf_counter()
    proto = _prototype(defense_cls, params)
    guarantee = proto.guarantee()
    if not guarantee.is_formal:
        raise ConfigError(f"defense {defense_cls.name!r} claims no formal guarantee: there is no epsilon to verify")
    boundary = guarantee.boundary
    adjacency, adjacency_source = claimed_adjacency(guarantee)
    plans = _plans(defense_cls, params, settings, adjacency)
    looks = settings.looks()
    worlds: dict[int, tuple[_World, _World]] = {}
    for number, plan in enumerate(plans):
        s = plan.scenario
        scores = {d.passage.text: d.score for d in s.world + s.neighbour}
        # disjoint seeds per verify seed, plan and world, up to the planned maximum of trials
        span = settings.planned_max + 1
        start = ((settings.seed * len(plans) + number) * 2) * span + 1
        pair = tuple(_World(plan.proto, s, [d.passage for d in w], scores, settings, a, boundary)
                     for w, a in ((s.world, start), (s.neighbour, start + span)))
        worlds[number] = pair  # type: ignore[assignment]
        _claim(plan, pair, settings)
    # testability, the family and the verdict of an unextended scenario rest on the base looks
    # (up to ``trials``); the extension looks can only add a chance to find a break
    base = settings.base_trials()
    full_m = base - ev.split(base)
    last_share = settings.look_shares()[base]

    def testable(plan: _Plan, a_plan: float) -> bool:
        return plan.claim is not None and plan.claim.eps < ev.ceiling(full_m, plan.claim.delta,
                                                                       a_plan * last_share / 2)

    # the Bonferroni family: every plan a test could decide at all (fixed before any trial runs);
    # those whose claim is above the ceiling at the family's level read inconclusive, unrun
    family = [i for i, p in enumerate(plans) if testable(p, settings.alpha)]
    a_plan = settings.alpha / max(1, len(family))
    tested = [i for i in family if testable(plans[i], a_plan)]
    # look-major: every undecided scenario reaches look 1, then look 2, ...: a break anywhere is
    # found at the cheapest look that shows it, and the time budget is spread over all scenarios
    runs = {i: _Run(plans[i], worlds[i]) for i in tested}
    deadline = t0 + settings.max_seconds
    cpu0 = time.process_time()
    broken = False
    shares = settings.look_shares()
    for look, n in enumerate(looks, start=1):
        share = shares[n]
        order = list(runs)
        if n > base:  # an extension look: the most promising first, each while the CPU budget allows
            order.sort(key=lambda i: -runs[i].promise())
        for i in order:
            run = runs[i]
            if run.final is not None or run.out_of_time or (broken and settings.stop_when_broken):
                continue
            if n > base and not run.affordable(n, time.process_time() - cpu0, settings.extend_cpu_seconds, deadline):
                run.not_extended = n
                continue
            run.step(look, n, a_plan * share, looks, deadline)
            broken = broken or (run.final is not None and run.final.verdict is Verdict.broken)
            if progress is not None:
                progress(f"look {look} ({n} trials): {plans[i].scenario.name}: "
                         f"{run.final.verdict.value if run.final else 'undecided'}")
    results = [runs[i].result(base, a_plan * last_share, broken) if i in runs
               else _judge_unrun(plan, base, a_plan * last_share)
               for i, plan in enumerate(plans)]
    verdict = combine([r.verdict for r in results if r.verdict is not None])
    violations = [f"{r.name}: {r.line}" for r in results if r.verdict is Verdict.broken]
    ceiling = ev.ceiling(full_m, settings.delta, a_plan * last_share / 2)
    return VerifyReport(
        defense=defense_cls.name, version=defense_cls.version, params=proto.params.model_dump(mode="json"),
        verdict=verdict, line=_run_line(verdict, results), exit_code=EXIT_CODES[verdict],
        boundary=guarantee.boundary, adjacency=adjacency, adjacency_source=adjacency_source, trials=settings.trials,
        looks=looks, alpha=settings.alpha, ceiling=ceiling, top_k=settings.top_k, candidate_k=settings.candidate_k,
        seed=settings.seed, scenarios=results,
        max_eps_lb=max((r.max_eps_lb for r in results), default=0.0), violated=verdict is Verdict.broken,
        violations=violations, seconds=round(time.perf_counter() - t0, 3))


def _run_line(verdict: Verdict, results: list[ScenarioResult]) -> str:
    first = next((r for r in results if r.verdict is verdict), None)
    if first is None:
        return "inconclusive: no scenario applies to this card"
    counts = {v: sum(r.verdict is v for r in results) for v in Verdict}
    tally = ", ".join(f"{n} {v.value}" for v, n in counts.items() if n)
    return f"{first.line} [{first.name}; scenarios: {tally}]"


def _claim(plan: _Plan, pair: tuple[_World, _World], settings: VerifySettings) -> None:
    """The plan's claim from the cards the defense states after serving each corpus (the more
    lenient of the two); void when either card is void there."""
    s = plan.scenario
    claims = []
    for world in pair:
        stated = world.stated()
        claim, reason = claim_for(stated, s.queries, s.adjacency, claimed_adjacency(stated)[0], settings.delta,
                                  s.principals)
        if claim is None:
            plan.reason = reason
            plan.void = not reason.startswith("outside the claim")
            plan.applicable = plan.void
            return
        claims.append(claim)
    plan.claim = max(claims, key=lambda c: c.eps)


def _base(plan: _Plan) -> dict:
    s = plan.scenario
    return dict(name=s.name, stress=s.stress, adjacency=s.adjacency, description=s.description, queries=s.queries,
                principals=s.principals)


def _judge_unrun(plan: _Plan, n: int, a_last: float) -> ScenarioResult:
    """A scenario no trial can decide: void, outside the claim, or a claim above the ceiling."""
    base, claim = _base(plan), plan.claim
    if plan.void:
        return ScenarioResult(**base, verdict=Verdict.void, applicable=True, reason=plan.reason,
                              line=void_line(plan.reason.removeprefix("card void: ")))
    if claim is None:
        return ScenarioResult(**base, verdict=None, applicable=False, reason=plan.reason,
                              line=f"not applicable: {plan.reason}")
    last_a = a_last / 2
    c = ev.ceiling(n - ev.split(n), claim.delta, last_a)
    return ScenarioResult(**base, verdict=Verdict.inconclusive, applicable=True, claim=claim, ceiling=c,
                          line=inconclusive_line(claim, n, c, ev.trials_to_reach(claim.eps, claim.delta, last_a)))


class _Run:
    """A tested scenario across the looks: its trials so far, the events certified at its latest
    look, and its verdict once decided (broken, or holds by futility)."""

    def __init__(self, plan: _Plan, pair: tuple[_World, _World]) -> None:
        assert plan.claim is not None
        self.plan, self.pair, self.claim = plan, pair, plan.claim
        self.done, self.found, self.ceiling, self.seconds, self.cpu = 0, [], 0.0, 0.0, 0.0
        self.final: ScenarioResult | None = None
        self.out_of_time = False
        #: the extension look this scenario did not start (CPU or time budget), 0: none skipped
        self.not_extended = 0

    def promise(self) -> float:
        """How close the best event of the latest look is to showing a break: its estimated log
        ratio's distance above the claim, in standard errors (extension looks go first to the
        largest)."""
        return max((_z(r, self.claim.eps) for r in self.found), default=-math.inf)

    def affordable(self, n: int, cpu_used: float, cpu_cap: float, deadline: float) -> bool:
        """Whether going on to n trials per world fits the run's CPU cap and its deadline, at this
        scenario's cost per trial so far (10% margin)."""
        if not self.done:
            return False
        more = 1.1 * (n - self.done) / self.done
        return (cpu_used + self.cpu * more <= cpu_cap
                and time.perf_counter() + self.seconds * more <= deadline)

    def step(self, look: int, n: int, a_look: float, looks: list[int], deadline: float) -> None:
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            if not all(w.extend(n, deadline) for w in self.pair):
                self.out_of_time = True
                return
            self.done, claim = n, self.claim
            k = ev.split(n)
            # ranked for where they will be certified: n - k held-out trials, at about the level
            # each event's two rates get (two events, and a split with the guessing game)
            chosen = ev.choose_events(self.pair[0].trials[:k], self.pair[1].trials[:k], claim.delta,
                                      ev.Target(n - k, a_look / 4))
            a_event = a_look / max(1, len(chosen))
            held = [w.trials[k:] for w in self.pair]
            self.ceiling = ev.ceiling(n - k, claim.delta, a_event)
            if chosen:  # each event also plays the guessing game, on both worlds' trials
                self.ceiling = max(self.ceiling, guess_ceiling(n - k, n - k, claim.delta, a_event / 2))
            selection = [w.trials[:k] for w in self.pair]
            self.found = [_certify(e, held, claim.delta, a_event, look, selection) for e in chosen]
        finally:
            self.seconds += time.perf_counter() - t0
            self.cpu += time.process_time() - c0
        worst = max(self.found, key=lambda r: r.eps_lb, default=None)
        if worst is not None and worst.eps_lb > claim.eps:
            self.final = ScenarioResult(**self._common(), verdict=Verdict.broken, violated=True,
                                        line=broken_line(claim, worst))
        elif _futile(n, looks, self.found, claim.eps, self.ceiling):
            self.final = ScenarioResult(**self._common(), verdict=Verdict.holds,
                                        reason=f"stopped at look {look}: every chosen event far below the claim",
                                        line=holds_line(claim, self.ceiling, n, self._max_lb())[:-1]
                                        + f"; stopped at look {look}: every chosen event far below the claim)")

    def _max_lb(self) -> float:
        return max((r.eps_lb for r in self.found), default=0.0)

    def _common(self) -> dict:
        return dict(**_base(self.plan), applicable=True, claim=self.claim, trials=self.done, ceiling=self.ceiling,
                    events=self.found, max_eps_lb=self._max_lb(), seconds=round(self.seconds, 3))

    def result(self, base: int, a_last: float, broken: bool) -> ScenarioResult:
        """The verdict at the last complete look: holds needs at least the base looks (``trials``);
        an extension cut short (budget, time) keeps the look before it."""
        if self.final is not None:
            return self.final
        claim = self.claim
        if self.done >= base and claim.eps < self.ceiling:
            skipped = (f"not extended to {self.not_extended} trials per world: the CPU or time budget was spent"
                       if self.not_extended else "")
            return ScenarioResult(**self._common(), verdict=Verdict.holds, reason=skipped,
                                  line=holds_line(claim, self.ceiling, self.done, self._max_lb()))
        if self.out_of_time:
            why = f"the time budget ran out after {self.done} of {base} trials per world"
        elif broken and self.done < base:
            why = f"stopped after {self.done} trials per world: another scenario decided the run broken"
        else:
            why = ""
        needed = ev.trials_to_reach(claim.eps, claim.delta, a_last / 2)
        return ScenarioResult(**self._common(), verdict=Verdict.inconclusive, reason=why,
                              line=inconclusive_line(claim, self.done, self.ceiling, needed, why))


def _futile(n: int, looks: list[int], found: list[EventResult], eps: float, ceiling: float) -> bool:
    return (FUTILITY_MIN_TRIALS <= n < looks[-1] and eps < ceiling and bool(found)
            and all(_far_below(r, eps) for r in found))


def _far_below(r: EventResult, eps: float) -> bool:
    """The event's estimated log ratio is more than FUTILITY_Z standard errors below eps."""
    return _z(r, eps) < -FUTILITY_Z


def _z(r: EventResult, eps: float) -> float:
    """(estimated log ratio - eps) / its standard error, for the event's held-out counts."""
    hit, n_hit, other, n_other = ((r.k_world, r.n_world, r.k_neighbour, r.n_neighbour) if r.direction == "D over D'"
                                  else (r.k_neighbour, r.n_neighbour, r.k_world, r.n_world))
    if hit == 0:
        return -math.inf
    if other == 0:
        return math.inf
    estimate = math.log((hit / n_hit) / (other / n_other))
    se = math.sqrt((1 - hit / n_hit) / hit + (1 - other / n_other) / other)
    return (estimate - eps) / se if se > 0 else (math.inf if estimate > eps else -math.inf)


def _certify(event: ev.Event, held: list[list[ev.Trial]], delta: float, a: float, look: int,
             selection: list[list[ev.Trial]] | None = None) -> EventResult:
    k_w, k_n = (sum(event(t) for t in trials) for trials in held)
    n_w, n_n = len(held[0]), len(held[1])
    guess = None
    if selection is not None:
        # the event is also certified by the guessing game on its score (larger: more like D; a
        # value-set event's score is membership), the guesses chosen on the selection trials; a is
        # split between the two (Bonferroni)
        a, table, sign = a / 2, dict(event.table), 1.0 if event.forward else -1.0

        def scores(trials: list[ev.Trial]) -> list[float]:
            if not event.table:
                return [sign * event(t) for t in trials]
            return [sign * sum(table.get(o, 0.0) for o in (ev.coarse(t) if event.coarse else t)) for t in trials]

        guess = guess_bound(*map(scores, held), delta, a, selection=(scores(selection[0]), scores(selection[1])),
                            seed=zlib.crc32(f"{look} {event.label}".encode()), gdp=False)
    lb = (ev.eps_bound(k_w, n_w, k_n, n_n, delta, a) if event.forward
          else ev.eps_bound(k_n, n_n, k_w, n_w, delta, a))
    label, estimator = event.label, "clopper-pearson"
    if guess is not None and guess.eps_lb > lb:
        lb, estimator = guess.eps_lb, f"guessing ({guess.estimator})"
        label += f" [guessing game: {guess.v} of {guess.r} guesses right on {guess.m} canaries]"
    return EventResult(event=label, direction="D over D'" if event.forward else "D' over D", k_world=k_w,
                       k_neighbour=k_n, n_world=n_w, n_neighbour=n_n, p_world=k_w / n_w, p_neighbour=k_n / n_n,
                       eps_lb=lb, look=look, estimator=estimator)


__all__ = ["VerifySettings", "charged_queries", "claim_for", "claimed_adjacency", "verify_defense"]
