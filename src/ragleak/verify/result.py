"""The records of ``ragleak verify``, its verdict words and exit codes.

Per scenario (a neighbouring pair D, D' asked T queries per trial) events are chosen on the
selection trials and certified on the held-out ones (``events``); sequential looks at a few
trial counts each spend a fixed share of the scenario's alpha, and the run's alpha is split
evenly over the scenarios that are tested, so with probability >= 1 - alpha no reported eps_lb
anywhere in the run is above the mechanism's true epsilon on its pair: a ``broken`` verdict is
wrong with probability at most alpha.

Verdicts (``Verdict``; the CLI's exit status in ``EXIT_CODES``):

* ``holds``: every tested claim was below what the trials could certify (its ceiling) and no
  certified event beat it; "tested to eps X at T" names the claim and query count tested. It is
  not a proof: a loss above the claim that no event of these trials exposes goes unseen;
* ``broken``: a certified event's eps_lb exceeds the claim (the event, p(D), p(D'), eps_lb);
* ``inconclusive``: the claim is at or above what N trials can show (the ceiling), or the time
  budget ran out first; the finest testable claim and the trials a test of this claim needs
  are stated;
* ``void``: the card is void (a violated assumption, an unknown chunk count, ...): there is no
  claim, so nothing to verify.
"""

from __future__ import annotations

import math
from enum import Enum

from pydantic import BaseModel, ConfigDict, Field, model_validator

SCHEMA_VERSION = 2


class Verdict(str, Enum):
    holds = "holds"
    broken = "broken"
    inconclusive = "inconclusive"
    void = "void"


#: exit status of ``ragleak verify`` per verdict; 2 is every usage error (a bad name or option)
EXIT_CODES = {Verdict.holds: 0, Verdict.broken: 1, Verdict.inconclusive: 3, Verdict.void: 4}
USAGE_ERROR = 2
#: which verdict a run takes when its scenarios disagree: the first present in this order
PRECEDENCE = (Verdict.broken, Verdict.void, Verdict.inconclusive, Verdict.holds)
MEANINGS = {
    Verdict.holds: "every tested claim was testable (below its ceiling) and no certified event beat it",
    Verdict.broken: "a certified event's eps lower bound exceeds the claim (wrong with probability <= alpha)",
    Verdict.inconclusive: "a claim is at or above what the trials can show, or the time budget ran out first",
    Verdict.void: "the card is void: there is no claim to verify",
}


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, ser_json_inf_nan="strings")


class EventResult(_Record):
    event: str
    direction: str = Field(description="'D over D\\'' (more likely on D) or 'D\\' over D'")
    k_world: int
    k_neighbour: int
    n_world: int
    n_neighbour: int
    p_world: float = Field(description="p(D): share of held-out trials on D where the event happened")
    p_neighbour: float = Field(description="p(D')")
    eps_lb: float = Field(description="lower bound on epsilon (at this look's Bonferroni level), from `estimator`")
    look: int = Field(description="the sequential look (1-based) that certified it")
    estimator: str = Field(default="clopper-pearson",
                           description="what gave eps_lb: 'clopper-pearson' (the event's two rates) or "
                                       "'guessing (steinke)' / 'guessing (f-dp)' (the one-run guessing game on the "
                                       "event's score, verify.one_run)")


class Claim(_Record):
    eps: float
    delta: float
    queries: int
    note: str = ""


class ScenarioResult(_Record):
    name: str
    stress: str
    adjacency: str
    description: str
    queries: int
    principals: int = 0
    verdict: Verdict | None = Field(description="None: the scenario's pair is outside the claim (not judged)")
    line: str = Field(description="the verdict in words")
    applicable: bool
    reason: str = ""
    claim: Claim | None = None
    trials: int = Field(default=0, description="trials per world run")
    ceiling: float = Field(default=0.0, description="the largest eps_lb these trials could certify")
    events: list[EventResult] = Field(default_factory=list)
    max_eps_lb: float = 0.0
    violated: bool = False
    seconds: float = 0.0


class VerifyReport(_Record):
    """A run's report. A schema-1 report (before verdicts) reads as broken when it recorded a
    violation and inconclusive otherwise: its green line established nothing."""

    schema_version: int = SCHEMA_VERSION
    defense: str
    version: str
    params: dict
    verdict: Verdict
    line: str = Field(description="the run's verdict in words")
    exit_code: int
    boundary: str = Field(description="what the claim covers, and so what the events observe")
    adjacency: str = Field(description="the adjacency the card claims (or inferred, see adjacency_source)")
    adjacency_source: str
    trials: int = Field(description="the most trials per world per scenario (looks stop earlier when decided)")
    looks: list[int] = Field(default_factory=list, description="trial counts per world at which a scenario is decided")
    alpha: float
    ceiling: float = Field(description="the largest eps_lb the full trials can certify in one scenario")
    top_k: int
    candidate_k: int
    seed: int
    scenarios: list[ScenarioResult]
    max_eps_lb: float
    violated: bool
    violations: list[str] = Field(default_factory=list)
    seconds: float = 0.0


    @model_validator(mode="before")
    @classmethod
    def _migrate(cls, data):
        if isinstance(data, dict) and "verdict" not in data:
            verdict = Verdict.broken if data.get("violated") else Verdict.inconclusive
            line = ("broken: " + "; ".join(data.get("violations") or []) if verdict is Verdict.broken else
                    "inconclusive: a report from before verdicts (schema 1) shows no ceiling")
            scenarios = [{**s, "verdict": s.get("verdict", (Verdict.broken if s.get("violated") else Verdict.inconclusive)
                                                 if s.get("applicable", True) else None),
                          "line": s.get("line", "")} if isinstance(s, dict) else s
                         for s in data.get("scenarios") or []]
            data = {**data, "verdict": verdict, "line": line, "exit_code": EXIT_CODES[verdict], "scenarios": scenarios}
        return data


def combine(verdicts: list[Verdict]) -> Verdict:
    """A run's verdict from its scenarios' (none tested reads inconclusive)."""
    for v in PRECEDENCE:
        if v in verdicts:
            return v
    return Verdict.inconclusive


def fmt(x: float | None) -> str:
    if x is None:
        return "-"
    if math.isinf(x):
        return "inf"
    return f"{x:.3g}" if x < 1e6 else f"{x:.2e}"


def holds_line(claim: Claim, ceiling: float, trials: int, max_lb: float) -> str:
    return (f"holds (tested to eps {fmt(claim.eps)} at T={claim.queries}: largest eps_lb {fmt(max_lb)}, "
            f"ceiling {fmt(ceiling)} at {trials} trials)")


def broken_line(claim: Claim, e: EventResult) -> str:
    # enough digits that a bound just above the claim does not print as equal to it
    lb = fmt(e.eps_lb) if fmt(e.eps_lb) != fmt(claim.eps) else f"{e.eps_lb:.6g}"
    return (f"broken (event {e.event} [{e.direction}], p(D) {e.p_world:.3f}, p(D') {e.p_neighbour:.3f}, "
            f"eps_lb {lb} > claim {fmt(claim.eps)} at T={claim.queries})")


def inconclusive_line(claim: Claim, trials: int, ceiling: float, needed: float, why: str = "") -> str:
    head = why or f"the claim eps {fmt(claim.eps)} at T={claim.queries} is above what {trials} trials can show"
    return (f"inconclusive: {head} (ceiling {fmt(ceiling)}); the finest testable claim is eps < {fmt(ceiling)} at "
            f"{trials} trials; testing eps {fmt(claim.eps)} needs >= {fmt(needed)} trials per world")


def void_line(reason: str) -> str:
    return f"void card: nothing to verify ({reason})"
