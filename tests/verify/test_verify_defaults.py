"""`ragleak verify` on every registered DP defense in its default configuration (no model: the
real hooks, the real FAISS index, generation over a scripted token distribution): each reads
``holds`` or ``inconclusive`` with its ceiling, never a bare green line, never broken or void.

Budgets are sized to the suite: 100 trials per world for the retrieval-side cards (every stress
of the card's adjacency; ca-dp two of them, and its budget line for one principal is above the
ceiling of 100 trials, so it reads inconclusive unrun), 100 for the generation-side ones (their per-answer
claims, eps 20-64, are untestable at any budget here and read inconclusive; dp-vote's per-token
claim runs), and dp-synthetic, which rebuilds its corpus over the WordNet vocabulary on every
trial (~0.3 s), at 12 trials on the single pair: below its claim's ceiling, so inconclusive.
No scenario goes on past these (``max_trials``): the suite's budget is the whole budget.
"""

from __future__ import annotations

import pytest

from ragleak.defenses import DEFENSES, make_defense
from ragleak.verify import Verdict, VerifySettings, verify_defense
from ragleak.verify.run import BUDGET_EXTRA

BUDGET = {"dp-synthetic": VerifySettings(trials=12, max_trials=12, stresses=("single",), adjacencies="card"),
          "ca-dp": VerifySettings(trials=100, max_trials=100, adjacencies="card", stresses=("contested", "pool-edge"),
                                  colluders=(1,))}
DEFAULT_BUDGET = VerifySettings(trials=100, max_trials=100, adjacencies="card")


def dp_defenses() -> list[str]:
    return [name for name in DEFENSES.names() if make_defense(name).guarantee().is_formal]


def test_every_dp_defense_is_verified_here():
    # a new DP defense is picked up by the parametrisation below; this pins the current set
    assert {"dp-retrieval", "ca-dp", "dp-vote", "private-rag", "dp-synthetic"} <= set(dp_defenses())


@pytest.mark.parametrize("name", dp_defenses())
def test_default_configuration_holds_or_is_inconclusive_with_its_ceiling(name):
    report = verify_defense(name, settings=BUDGET.get(name, DEFAULT_BUDGET))
    assert report.verdict in (Verdict.holds, Verdict.inconclusive), f"{name}: {report.line}"
    assert report.exit_code == (0 if report.verdict is Verdict.holds else 3)
    judged = [s for s in report.scenarios if s.verdict is not None]
    assert judged, f"{name}: no scenario applies"
    for s in judged:
        if s.verdict is Verdict.holds:
            assert s.line.startswith("holds (tested to eps") and s.trials > 0 and s.max_eps_lb <= s.claim.eps
        else:
            assert s.line.startswith("inconclusive:") and "ceiling" in s.line and "finest testable claim" in s.line


def test_ca_dp_has_a_line_per_number_of_colluding_principals():
    report = verify_defense("ca-dp", settings=VerifySettings(trials=50, max_trials=50, adjacencies="card", stresses=(),
                                                             colluders=(1, 2, 4, 8)))
    lines = {s.principals: s for s in report.scenarios}
    assert set(lines) == {1, 2, 4, 8}
    n = make_defense("ca-dp").max_turns
    # k colluders ask (k + BUDGET_EXTRA) N queries and are charged at most k N: the card's eps(k N)
    assert [lines[k].claim.queries for k in (1, 2, 4, 8)] == [(k + BUDGET_EXTRA) * n for k in (1, 2, 4, 8)]
    eps = [lines[k].claim.eps for k in (1, 2, 4, 8)]
    assert eps == sorted(eps) and eps[0] == pytest.approx(4.0, rel=1e-6)
    assert all("ceiling" in lines[k].line for k in (2, 4, 8))  # eps(8 N) and beyond: untestable here
