"""The records of ``ragleak verify`` and the statistics behind them.

Per event E (a function of what the claim's boundary releases, fixed before any trial runs)
the trials give k of n in D and k' of n' in D'. A mechanism that is (eps, delta)-DP for this pair
satisfies P_D(E) <= e^eps P_D'(E) + delta, the same with D and D' swapped, and both again for
the complement of E. ``bounds.eps_lower_bound`` turns one direction (E and its complement) into
a one-sided Clopper-Pearson lower bound on eps; it is called for both directions, so every event
uses four one-sided bounds. Bonferroni over all of them in the whole run: each is taken at level
alpha / (4 * events), so with probability >= 1 - alpha no reported lower bound is above the
mechanism's true epsilon on its pair, and a violation flagged anywhere is real at level alpha.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from ragleak.accounting.bounds import audit_ceiling, eps_lower_bound

SCHEMA_VERSION = 1


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, ser_json_inf_nan="strings")


class EventResult(_Record):
    event: str
    k_world: int
    k_neighbour: int
    n_world: int
    n_neighbour: int
    p_world: float = Field(description="p(D): share of trials on D where the event happened")
    p_neighbour: float = Field(description="p(D')")
    eps_lb: float = Field(description="Clopper-Pearson lower bound on epsilon from this event (Bonferroni-adjusted)")


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
    applicable: bool
    reason: str = ""
    claim: Claim | None = None
    events: list[EventResult] = Field(default_factory=list)
    max_eps_lb: float = 0.0
    violated: bool = False
    seconds: float = 0.0


class VerifyReport(_Record):
    schema_version: int = SCHEMA_VERSION
    defense: str
    version: str
    params: dict
    boundary: str = Field(description="what the claim covers, and so what the events observe")
    adjacency: str = Field(description="the adjacency the card claims (or inferred, see adjacency_source)")
    adjacency_source: str
    trials: int = Field(description="trials per world per scenario")
    alpha: float
    bounds: int = Field(description="one-sided Clopper-Pearson bounds in the Bonferroni family")
    ceiling: float = Field(description="the largest eps_lb any event can reach with these trials")
    top_k: int
    candidate_k: int
    seed: int
    scenarios: list[ScenarioResult]
    max_eps_lb: float
    violated: bool
    violations: list[str] = Field(default_factory=list)
    seconds: float = 0.0


def event_lower_bound(k_world: int, n_world: int, k_neighbour: int, n_neighbour: int, *, delta: float,
                      alpha: float, events: int) -> float:
    """The larger of the two directions' eps lower bounds for one event, each at the level that
    keeps the whole family of ``events`` events (four one-sided bounds each) at ``alpha``."""
    # eps_lower_bound bounds its two rates at alpha / (2 * n_thresholds); 2 * events "thresholds"
    # (one per event and direction) give alpha / (4 * events) per bound
    n_thresholds = 2 * events
    forward = eps_lower_bound(fp=k_neighbour, n_out=n_neighbour, fn=n_world - k_world, n_in=n_world,
                              delta=delta, alpha=alpha, n_thresholds=n_thresholds)
    backward = eps_lower_bound(fp=k_world, n_out=n_world, fn=n_neighbour - k_neighbour, n_in=n_neighbour,
                               delta=delta, alpha=alpha, n_thresholds=n_thresholds)
    return max(forward, backward)


def ceiling(trials: int, alpha: float, events: int) -> float:
    """The eps_lb of a perfect event (always on one world, never on the other) at this family size."""
    return max(0.0, audit_ceiling(trials, alpha=2 * alpha / (4 * events)))
