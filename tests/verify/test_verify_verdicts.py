"""`ragleak verify`'s verdicts on broken copies of the real defenses (tests/verify/broken_copies.py)
and on void and untestable cards, through the CLI where the exit status is the point.

Only the cheap copies run here (the half-noise selection at the suite's budget ``CI``, the voter
copy); benchmarks/bench_verify.py runs all six at the default settings.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

import pytest
from typer.testing import CliRunner

from ragleak.errors import ConfigError
from ragleak.verify import Verdict, VerifyReport, VerifySettings, verify_defense

COPIES = Path(__file__).with_name("broken_copies.py")
#: the suite's budget for a retrieval-side card: 800 trials per world at most (looks at 100, 200,
#: 400, 800) on the card's adjacency, for the three stresses that target distinct failure classes
#: (noise scale: contested; a data-dependent pool: pool-edge; the unit: chunk-count); no extension
CI = VerifySettings(trials=800, max_trials=800, adjacencies="card", stresses=("contested", "pool-edge", "chunk-count"),
                    colluders=())


def _cli(*args: str):
    from ragleak.cli import app

    return CliRunner().invoke(app, ["verify", *args])


def test_half_noise_is_broken_at_the_ci_budget_through_a_file_defense(tmp_path):
    out = tmp_path / "verify.json"
    stresses = [a for s in CI.stresses for a in ("--stress", s)]
    result = _cli(f"{COPIES}:HalfNoise", "--trials", str(CI.trials), "--max-trials", str(CI.max_trials),
                  "--adjacency", "card", *stresses, "--json", str(out))
    assert result.exit_code == 1, result.output
    report = VerifyReport.model_validate_json(out.read_text())
    assert report.verdict is Verdict.broken and report.violated and report.exit_code == 1
    broken = next(s for s in report.scenarios if s.verdict is Verdict.broken)
    worst = max(broken.events, key=lambda e: e.eps_lb)
    # what the verdict rests on: a held-out event far more likely on one corpus than the other
    assert worst.eps_lb > broken.claim.eps == 1.0
    assert "broken (event" in broken.line and "p(D)" in broken.line and "broken (event" in result.output


def test_every_voter_reading_every_document_is_broken_per_token():
    report = verify_defense(_copy("EveryVoterReadsAll"),
                            settings=VerifySettings(trials=400, max_trials=400, adjacencies="card",
                                                    stresses=("single",)))
    assert report.verdict is Verdict.broken
    broken = next(s for s in report.scenarios if s.verdict is Verdict.broken)
    assert "max_new_tokens=1" in broken.name and broken.claim.eps == 2.0  # the per-token claim, eps_token
    # the per-answer claim (32 tokens x 2) is above any ceiling here: inconclusive, never green
    assert all(s.verdict is Verdict.inconclusive for s in report.scenarios if s is not broken)


def _copy(name: str):
    from ragleak.defenses.loader import defense_class

    return defense_class(f"{COPIES}:{name}")


def test_a_void_card_is_void_and_exits_4(tmp_path):
    out = tmp_path / "v.json"
    result = _cli("dp-retrieval", "--params", "pool=5", "--trials", "50", "--adjacency", "card", "--json", str(out))
    assert result.exit_code == 4, result.output
    report = json.loads(out.read_text())
    assert report["verdict"] == "void" and report["line"].startswith("void card: nothing to verify")
    assert all(s["trials"] == 0 for s in report["scenarios"])


def test_an_untestable_claim_is_inconclusive_with_its_ceiling_and_exits_3():
    result = _cli("dp-vote", "--trials", "50", "--adjacency", "card", "--no-per-token", "--stress", "single",
                  "--json", "-")
    assert result.exit_code == 3, result.output
    report = VerifyReport.model_validate_json(result.output)
    (s,) = report.scenarios
    assert s.verdict is Verdict.inconclusive and s.trials == 0
    assert "ceiling" in s.line and "finest testable claim" in s.line and s.claim.eps == 64


def test_the_honest_selection_holds_where_the_copy_breaks():
    report = verify_defense("dp-retrieval", settings=VerifySettings(trials=800, max_trials=800, adjacencies="card",
                                                                    stresses=("contested",)))
    (s,) = report.scenarios
    assert report.verdict is Verdict.holds and report.exit_code == 0 and s.trials == 800
    assert s.line.startswith("holds (tested to eps 1 at T=1") and s.max_eps_lb <= 1.0


def test_an_undecided_scenario_goes_on_past_trials_while_the_cpu_budget_allows():
    base = dict(trials=100, adjacencies="card", stresses=("single",))
    extended = verify_defense("dp-retrieval", settings=VerifySettings(**base))  # planned: 4 x 100
    (s,) = extended.scenarios
    assert extended.looks[-1] == 400 and s.trials == 400 and s.verdict is Verdict.holds and "at 400 trials" in s.line
    # no CPU left for it: the scenario is judged at its base looks, the extension's alpha unspent
    kept = verify_defense("dp-retrieval", settings=VerifySettings(**base, extend_cpu_seconds=0.0))
    (s,) = kept.scenarios
    assert s.trials == 100 and s.verdict is Verdict.holds and "at 100 trials" in s.line


def test_the_looks_spend_the_whole_alpha_fixed_before_any_trial():
    default = VerifySettings()
    assert default.looks() == [1250, 2500, 5000, 10000, 20000, 40000]
    for settings in (default, VerifySettings(trials=800, max_trials=800), VerifySettings(trials=12),
                     VerifySettings(trials=1000, max_trials=3000)):
        assert sum(settings.look_shares().values()) == pytest.approx(1.0)
    assert VerifySettings(trials=1000, max_trials=3000).extension_looks() == [2000, 3000]
    with pytest.raises(ConfigError):
        VerifySettings(trials=1000, max_trials=500)


@pytest.mark.parametrize("args", [["no-such-defense"], ["pad-regex"], [f"{COPIES}:NoSuchClass"],
                                  ["dp-retrieval", "--params", "epsilon=-1"], ["dp-retrieval", "--stress", "nope"]])
def test_usage_errors_exit_2(monkeypatch, capsys, args):
    # pad-regex claims no formal guarantee: nothing to verify, said as a usage error, not a verdict
    from ragleak import cli

    monkeypatch.setattr("sys.argv", ["ragleak", "verify", *args])
    with pytest.raises(SystemExit) as exit_:
        cli.main()
    assert exit_.value.code == 2 and capsys.readouterr().err.strip()


def test_the_docs_table_states_every_verdict_and_its_exit_status():
    from ragleak.verify.result import EXIT_CODES, USAGE_ERROR

    text = (Path(__file__).parents[2] / "docs" / "verify.md").read_text(encoding="utf-8")
    rows = {line.split("|")[1].strip(): int(line.split("|")[2]) for line in text.splitlines()
            if line.startswith("| ") and line.split("|")[2].strip().isdigit()}
    assert rows == {**{v.value: code for v, code in EXIT_CODES.items()}, "(usage error)": USAGE_ERROR}


def test_events_are_ranked_for_the_held_out_trials_that_certify_them():
    # a Laplace top-5 selection at 1.25x its claim: X at any of 5 ranks, each 3.5x likelier on D
    # (the ratio of the whole mechanism); ranked as if certified on the selection trials, a
    # subset of ranks that looked best by chance wins; ranked for the 7,000 held-out trials at
    # the certificate's level, the event with the mass does, and certifies higher
    from ragleak.verify import events as ev
    from ragleak.verify.run import _certify

    values = [((("doc-x", i),),) for i in range(5)] + [((),)]
    p, q = np.array([0.0568] * 5 + [0.716]), np.array([0.0163] * 5 + [0.9185])
    rng = np.random.default_rng(3)
    draw = lambda probs, n: [values[i] for i in rng.choice(6, size=n, p=probs / probs.sum())]  # noqa: E731
    lbs: dict[str, list[float]] = {"old": [], "target": []}
    for _ in range(12):
        d, dn = draw(p, 10000), draw(q, 10000)
        for name, target in (("old", ev.Target(0, 0.05)), ("target", ev.Target(7000, 0.002))):
            events = ev.choose_events(d[:3000], dn[:3000], 0.0, target)
            lbs[name].append(max(_certify(e, [d[3000:], dn[3000:]], 0.0, 0.004, 4).eps_lb for e in events))
    assert np.mean(lbs["target"]) > np.mean(lbs["old"]) + 0.02
    assert max(lbs["target"]) <= 1.25  # never above the mechanism's own loss

