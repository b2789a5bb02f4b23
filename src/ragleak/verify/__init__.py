"""``ragleak verify``: an empirical privacy test of a defense's real code path on neighbouring
corpora, against the epsilon its guarantee card claims; the verdict says what was shown."""

from ragleak.verify.result import EXIT_CODES, EventResult, ScenarioResult, Verdict, VerifyReport
from ragleak.verify.run import VerifySettings, claimed_adjacency, verify_defense
from ragleak.verify.scenarios import STRESSES, Scenario, build_scenarios

__all__ = ["EXIT_CODES", "STRESSES", "EventResult", "Scenario", "ScenarioResult", "Verdict", "VerifyReport",
           "VerifySettings", "build_scenarios", "claimed_adjacency", "verify_defense"]
