"""``ragleak verify``: an empirical privacy test of a defense's real code path on neighbouring
corpora, against the epsilon its guarantee card claims."""

from ragleak.verify.result import EventResult, ScenarioResult, VerifyReport
from ragleak.verify.run import VerifySettings, claimed_adjacency, verify_defense
from ragleak.verify.scenarios import STRESSES, Scenario, build_scenarios

__all__ = ["STRESSES", "EventResult", "Scenario", "ScenarioResult", "VerifyReport", "VerifySettings",
           "build_scenarios", "claimed_adjacency", "verify_defense"]
