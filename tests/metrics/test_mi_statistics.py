"""MI statistics an auditor can act on: TPR at 1% and 0.1% FPR with intervals that re-choose the
threshold, findings only where the interval carries them, withheld probes flagged, intervals over
runs, and the paired difference of two attacks on the same candidates."""

from __future__ import annotations

import numpy as np
import pytest

from ragleak.attacks.base import MembershipScore
from ragleak.metrics import MetricContext
from ragleak.metrics.membership import (MembershipAUC, auc, auc_finding, membership_auc, membership_over_runs,
                                        paired_auc_difference, withheld_share)

from metric_transcripts import PARAPHRASE, transcript


def test_tpr_bootstrap_intervals_rechoose_the_threshold():
    rng = np.random.default_rng(5)
    members, nonmembers = rng.normal(2.5, 1, 100), rng.normal(0, 1, 300)
    res = membership_auc(members, nonmembers, n_resamples=300)
    assert set(res.tpr_intervals) == {"10%", "1%", "0.1%"}
    for key, value in (("10%", res.tpr_at_10pct), ("1%", res.tpr_at_1pct), ("0.1%", res.tpr_at_0_1pct)):
        low, high = res.tpr_intervals[key]
        assert 0.0 <= low <= high <= 1.0 and low <= value + 0.05
    # the threshold at 1% FPR of 300 non-members rests on the 4th-highest of them: re-choosing it in
    # each resample moves the TPR further than the exact interval over the members alone allows
    cp_width = res.tpr_at_1pct_ci[1] - res.tpr_at_1pct_ci[0]
    boot_width = res.tpr_intervals["1%"][1] - res.tpr_intervals["1%"][0]
    assert boot_width > cp_width


def test_findings_follow_the_interval_not_the_point_estimate():
    assert auc_finding(34.8, (20.1, 50.3)) == "inconclusive"
    assert auc_finding(30.0, (20.0, 45.0)) == "reversal"
    assert auc_finding(85.0, (64.0, 100.0)) == "above chance"
    assert auc_finding(40.0, None) == "no interval"
    # below 50 on a few candidates: below chance, but no reversal is claimed
    weak = membership_auc([0.4, 0.5, 0.3], [0.5, 0.45, 0.6, 0.2, 0.55], n_resamples=200)
    assert weak.below_chance and not weak.reversal and weak.finding == "inconclusive"


def _mi_transcript(context_ids: list[list[str]]):
    rows = [MembershipScore(doc_id=f"m{i}", scores={"s": 1.0 + i}, member=True) for i in range(3)]
    rows += [MembershipScore(doc_id=f"n{i}", scores={"s": 0.1 * i}, member=False) for i in range(3)]
    return transcript("mi", [(PARAPHRASE[0], ids) for ids in context_ids], membership=rows)


def test_a_cell_whose_defense_withheld_most_passages_says_so():
    t = _mi_transcript([[], [], [], ["d2#0"]])
    assert withheld_share(t) == pytest.approx(0.75)
    res = MembershipAUC().compute(t, MetricContext(seed=0))
    assert res.details["withheld_most"] and res.details["finding"] == "withheld"
    assert "chance by construction" in res.note
    kept = MembershipAUC().compute(_mi_transcript([["d1#0"], ["d2#0"], [], ["d2#0"]]), MetricContext(seed=0))
    assert not kept.details["withheld_most"] and kept.note is None
    assert kept.details["finding"] == "above chance"


def test_intervals_over_runs_carry_the_run_to_run_variance():
    rng = np.random.default_rng(3)
    runs = []
    for shift in (2.0, 0.0, 1.0):  # a defense whose noise helps the attacker in one run only
        rows = [MembershipScore(doc_id=f"m{i}", scores={"s": float(x)}, member=True)
                for i, x in enumerate(rng.normal(shift, 1, 30))]
        rows += [MembershipScore(doc_id=f"n{i}", scores={"s": float(x)}, member=False)
                 for i, x in enumerate(rng.normal(0, 1, 90))]
        runs.append(_mi_transcript([["d1#0"], []]).model_copy(update={"membership": rows}))
    out = membership_over_runs(runs, n_resamples=200)
    s = out["scorers"]["s"]
    assert s["interval"]["n_unique"] == 3 and s["n_members"] == 90 and s["runs_left_out"] == 0
    one_run = membership_auc([m.scores["s"] for m in runs[0].membership if m.member],
                             [m.scores["s"] for m in runs[0].membership if not m.member], n_resamples=200)
    # the pooled interval over runs reaches down to the run where the noise hid membership
    assert s["interval"]["low"] < one_run.interval.low
    assert out["withheld_share"] == pytest.approx(0.5) and not out["withheld_most"]


def test_paired_difference_of_two_attacks_on_the_same_candidates():
    rng = np.random.default_rng(9)
    labels = [True] * 40 + [False] * 120
    strong = np.r_[rng.normal(3, 1, 40), rng.normal(0, 1, 120)]
    weak = np.r_[rng.normal(0.5, 1, 40), rng.normal(0, 1, 120)]
    diff = paired_auc_difference(labels, strong, weak, n_resamples=300)
    assert diff.estimate == pytest.approx(100 * (auc(strong[:40], strong[40:]) - auc(weak[:40], weak[40:])))
    assert diff.low > 0
    same = paired_auc_difference(labels, strong, strong, n_resamples=100)
    assert (same.estimate, same.low, same.high) == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError):
        paired_auc_difference(labels, strong, weak[:3])


def test_vectorised_auc_bootstrap_equals_the_generic_one():
    from ragleak.metrics.stats import bootstrap, roc_auc

    rng = np.random.default_rng(0)
    for m, n in ((rng.normal(1, 1, 10), rng.normal(0, 1, 60)), (rng.integers(0, 3, 7), rng.integers(0, 3, 20))):
        units = [(1, float(x)) for x in m] + [(0, float(x)) for x in n]
        ref = bootstrap(units, lambda s: 100 * roc_auc([u for u, _ in s], [v for _, v in s]), n_resamples=100, seed=3)
        got = membership_auc(m, n, n_resamples=100, seed=3).interval
        assert (got.low, got.high) == (pytest.approx(ref.low, abs=1e-9), pytest.approx(ref.high, abs=1e-9))
        assert (got.estimate, got.n_unique, got.n_undefined) == (pytest.approx(ref.estimate), ref.n_unique,
                                                                 ref.n_undefined)


def test_statistics_presets_resolve_tpr_at_1pct_and_seed_the_noisy_defenses():
    from ragleak.attacks import ATTACKS
    from ragleak.grid.spec import preset

    stats = preset("statistics")
    assert set(stats.defenses) == {"none"}
    for attack in stats.attacks:
        p = ATTACKS.get(attack)(**stats.attack_params[attack]).params
        assert p.n_members >= 100 and p.n_nonmembers >= 300 and p.n_members <= p.kb_size
        for corpus in stats.corpora:
            assert stats.corpus_params[corpus]["n_docs"] >= p.kb_size + p.n_nonmembers
    # every attack draws the same split (sizes, shuffled order, seed), so their AUCs pair candidate by candidate
    splits = {tuple(getattr(ATTACKS.get(a)(**stats.attack_params[a]).params, k)
                    for k in ("n_members", "n_nonmembers", "kb_size", "shuffle")) for a in stats.attacks}
    assert len(splits) == 1 and next(iter(splits))[3] is True
    dp = preset("statistics-dp")
    assert {"dp-retrieval", "ca-dp", "private-rag"} <= set(dp.defenses) and len(set(dp.seeds)) >= 3
    assert {"mi", "mi-entailment"} <= set(dp.attacks)
