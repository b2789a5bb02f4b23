"""`ragleak verify` on every registered DP defense in its default configuration (no model: the
real hooks, the real FAISS index, generation over a scripted token distribution), and proof that
the check can fail: a Laplace selection with a third of its stated noise is caught.

Trial counts are sized to the suite (this file < 60 s on 2 shared cores): 200 trials per world
reach an eps lower bound above 1 for an event that one corpus never shows and the other shows in
a fifth of the trials (the pool-edge case), which is what a selection restricted to a pool
produces. The stated claims of the generation-side defenses (eps 20-64 per answer at their
defaults) are far above what any finite test here can certify; their runs check the code path
end to end and would flag a mechanism that leaks outright.
"""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from ragleak.defenses import DEFENSES, make_defense
from ragleak.defenses.dp_retrieval import DPRetrieval
from ragleak.verify import STRESSES, VerifySettings, verify_defense

# per defense: trials per world and the stresses run (dp-synthetic rebuilds its corpus over the
# whole WordNet vocabulary on every trial, ~0.1 s, so it runs the single-document pair only)
BUDGET = {"dp-synthetic": (10, ("single",))}
DEFAULT_BUDGET = (200, STRESSES)
GENERATION_BUDGET = (80, STRESSES)


def dp_defenses() -> list[str]:
    return [name for name in DEFENSES.names() if make_defense(name).guarantee().is_formal]


def test_every_dp_defense_is_verified_here():
    # a new DP defense is picked up by the parametrisation below; this pins the current set
    assert {"dp-retrieval", "ca-dp", "dp-vote", "private-rag", "dp-synthetic"} <= set(dp_defenses())


@pytest.mark.parametrize("name", dp_defenses())
def test_default_configuration_passes_verify(name):
    generation = make_defense(name).overrides("generate")
    trials, stresses = BUDGET.get(name, GENERATION_BUDGET if generation else DEFAULT_BUDGET)
    report = verify_defense(name, settings=VerifySettings(trials=trials, stresses=stresses, adjacencies="card"))
    ran = [s for s in report.scenarios if s.applicable]
    assert ran and all(s.events for s in ran), f"{name}: no scenario ran ({[s.reason for s in report.scenarios]})"
    assert not report.violated, f"{name}: {report.violations}"


class ThirdOfTheNoise(DPRetrieval):
    """Laplace selection whose noise scale is a third of what its card's epsilon needs (3x eps)."""

    name = "dp-retrieval-third-noise"

    @property
    def sensitivity(self) -> float:
        return super().sensitivity / 3


SINGLE = VerifySettings(trials=300, stresses=("single",), adjacencies="card")


def test_a_mis_scaled_mechanism_is_caught_and_the_correct_one_is_not():
    caught = verify_defense(ThirdOfTheNoise, settings=SINGLE)
    assert caught.violated and caught.max_eps_lb > 1.0
    worst = max(caught.scenarios[0].events, key=lambda e: e.eps_lb)
    assert worst.p_world > 3 * worst.p_neighbour  # what the flag rests on: p(D) against p(D')
    honest = verify_defense(DPRetrieval, settings=SINGLE)
    assert not honest.violated and honest.max_eps_lb < 1.0


def test_cli_exits_1_on_a_violation_and_writes_json(tmp_path):
    from ragleak.cli import app
    from ragleak.verify import VerifyReport

    DEFENSES.register(ThirdOfTheNoise.name, f"{__name__}:ThirdOfTheNoise")
    try:
        out = tmp_path / "verify.json"
        result = CliRunner().invoke(app, ["verify", ThirdOfTheNoise.name, "--trials", "300", "--stress", "single",
                                          "--adjacency", "card", "--params", "epsilon=1", "--json", str(out)])
        assert result.exit_code == 1, result.output
        report = VerifyReport.model_validate_json(out.read_text())
        assert report.violated and report.defense == ThirdOfTheNoise.name and report.params["epsilon"] == 1.0
        assert "VIOLATED" in result.output
    finally:
        DEFENSES.unregister(ThirdOfTheNoise.name)
