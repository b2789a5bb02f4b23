"""The report's claims-against-evidence table: the claimed eps(T) next to the membership
attack's own lower bound and a `ragleak verify` report, from a run directory written by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ragleak.attacks.base import MembershipScore, QueryRecord, Transcript
from ragleak.defenses import make_defense
from ragleak.grid.spec import GridConfig
from ragleak.grid.store import CellRecord, QueryCounts, RunStore
from ragleak.report.build import build_report
from ragleak.report.privacy_checks import mi_lower_bound
from ragleak.report.summary import summarize
from ragleak.verify import VerifyReport

# dp-vote with one token at eps 0.01: a claim a perfect membership attack on 40 candidates beats
TIGHT = {"eps_token": 0.01, "max_new_tokens": 1}
CONFIG = GridConfig(attacks=["mi"], defenses=["none", "dp-vote", "private-rag"], corpora=["synthetic-corp"],
                    defense_params={"dp-vote": TIGHT})


def _transcript(members: list[float], nonmembers: list[float]) -> str:
    scores = [MembershipScore(doc_id=f"m{i}", scores={"s2mia": s}, member=True) for i, s in enumerate(members)]
    scores += [MembershipScore(doc_id=f"n{i}", scores={"s2mia": s}, member=False) for i, s in enumerate(nonmembers)]
    queries = [QueryRecord(index=i, query=f"q{i}", answer="a") for i in range(len(scores))]
    return Transcript(attack="mi", attack_version="1", threat_model="black-box", params={}, seed=0,
                      budget=len(queries), target="t", exposes_retrieved_ids=False, queries=queries,
                      membership=scores).to_json()


def _run(tmp_path: Path) -> Path:
    cells = CONFIG.expand()
    store = RunStore(tmp_path)
    store.init(CONFIG, cells)
    rng = np.random.default_rng(0)
    separated = ([1.0 + i for i in range(20)], [-1.0 - i for i in range(20)])  # a perfect attack
    chance = (list(rng.normal(size=20)), list(rng.normal(size=20)))
    for spec in cells:
        members, nonmembers = separated if spec.defense == "dp-vote" else chance
        store.write_transcript(spec.cell_id, _transcript(members, nonmembers))
        guarantee = make_defense(spec.defense, **spec.defense_kwargs()).guarantee()
        store.write(CellRecord(cell_id=spec.cell_id, spec=spec, status="ok", transcript_digest=spec.cell_id,
                               counts=QueryCounts(queries=40, answered=40, refused=0, errors=0),
                               guarantee=guarantee.model_dump(mode="json")))
    return tmp_path


def test_a_claim_the_membership_attack_beats_is_flagged(tmp_path):
    rows = {r["defense"]: r for r in summarize(_run(tmp_path))["privacy_checks"]}
    assert set(rows) == {"dp-vote", "private-rag"}  # the baseline claims nothing
    vote = rows["dp-vote"]
    assert vote["queries"] == 40 and not vote["claim_void"] and vote["claim_eps"] < 1.0
    assert vote["mi"]["tpr"] == 1.0 and vote["mi"]["fpr"] == 0.0 and vote["mi"]["eps_lb"] > vote["claim_eps"]
    assert vote["mi"]["tpr_ceiling"] < 1.0  # what the claim would allow at FPR 0
    assert vote["beaten"] and vote["beaten_by"] == ["membership attack"]
    rag = rows["private-rag"]
    assert not rag["beaten"] and rag["mi"]["eps_lb"] < rag["claim_eps"]


def test_a_verify_report_in_the_run_folder_is_shown_and_its_violation_flags(tmp_path):
    run = _run(tmp_path)
    params = make_defense("private-rag").params.model_dump(mode="json")
    report = VerifyReport(defense="private-rag", version="1", params=params, boundary="answers", adjacency="add-remove",
                          adjacency_source="card notes", trials=10, alpha=0.05, bounds=4, ceiling=1.0, top_k=5,
                          candidate_k=20, seed=0, scenarios=[], max_eps_lb=99.0, violated=True,
                          violations=["pool-edge/add-remove: eps_lb 99 > claimed 20"])
    (run / "verify").mkdir()
    (run / "verify" / "private-rag.json").write_text(report.model_dump_json())
    rows = {r["defense"]: r for r in summarize(run)["privacy_checks"]}
    assert rows["private-rag"]["verify"]["max_eps_lb"] == 99.0 and rows["private-rag"]["beaten_by"] == ["verify"]
    assert rows["dp-vote"]["verify"] is None  # another defense's report does not match
    page = Path(build_report(run)["report"]).read_text()
    assert "Claims against evidence" in page and page.count("class=\"beaten\"") >= 2 and "BEATEN by verify" in page


@given(st.lists(st.floats(-5, 5), min_size=1, max_size=30), st.lists(st.floats(-5, 5), min_size=1, max_size=30))
@settings(deadline=None, max_examples=40)
def test_no_labelling_certifies_more_than_a_perfect_split(members, nonmembers):
    best = mi_lower_bound([("s", members, nonmembers)], delta=0.0)
    assert best is not None and best["eps_lb"] >= 0.0
    # any scores certify at most what a perfect split of these sizes (fewest thresholds) would
    perfect = mi_lower_bound([("s", [10.0] * len(members), [-10.0] * len(nonmembers))], delta=0.0)
    assert best["eps_lb"] <= perfect["eps_lb"] + 1e-9


def test_a_beaten_claim_is_a_sarif_error(tmp_path):
    import json

    from ragleak.report.ci import sarif

    findings = json.loads(sarif(summarize(_run(tmp_path))))["runs"][0]["results"]
    beaten = [f for f in findings if f["ruleId"] == "ragleak.claim-beaten"]
    assert len(beaten) == 1 and beaten[0]["level"] == "error" and "dp-vote" in beaten[0]["message"]["text"]
