"""The seed's failure mode: DP-style defenses with a stubbed generation hook are flagged, statically
and dynamically, and the interpretable rule refuses to read their output metrics as DP effects."""

from __future__ import annotations

import pytest
from audit_helpers import FIXTURES, load_fixture, run_pipeline

from ragleak.audit import StubHookError, hook_activity, inventory_class, inventory_file
from ragleak.audit.channels import active_hooks
from ragleak.audit.dashboard import table_one

STUBS = ["StubbedDPRetrieval", "StubbedCompositionAwareDP", "StubbedPrivateRAG"]


@pytest.fixture(scope="module")
def stubs():
    return load_fixture("dp_stubs")


@pytest.mark.parametrize("name", STUBS)
def test_the_generation_stub_is_flagged_and_retrieval_is_active(stubs, name):
    inv = inventory_class(getattr(stubs, name))
    assert inv.finding("generate").status == "inactive"
    assert inv.finding("score_retrieval").status == "active"
    assert "generate" in [f.hook for f in inv.problems]
    with pytest.raises(StubHookError, match="generate"):
        inventory_class(getattr(stubs, name), strict=True)


def test_the_todo_stub_cites_its_comment(stubs):
    finding = inventory_class(stubs.StubbedDPRetrieval).finding("generate")
    assert finding.form == "stub-comment" and "plain generation" in finding.evidence
    assert "TODO" in finding.evidence and "dp_stubs.py" in finding.location


def test_file_route_flags_every_stub():
    invs = {inv.cls: inv for inv in inventory_file(FIXTURES / "dp_stubs.py")}
    assert set(invs) == set(STUBS)
    assert all(inv.finding("generate").status == "inactive" for inv in invs.values())
    assert invs["StubbedPrivateRAG"].finding("postprocess").problem is not None  # declared, never written


def test_dynamic_trace_shows_generation_never_changed(stubs):
    traces = run_pipeline(stubs.StubbedDPRetrieval()) + run_pipeline(stubs.StubbedCompositionAwareDP())
    activity = hook_activity(traces)
    for defense in ("stub-dp-retrieval", "stub-ca-dp"):
        assert activity[defense]["generate"].label == "0/4"
        assert activity[defense]["score_retrieval"].changed == 4  # Laplace noise changes every call
    rows = {r["defense"]: r for r in table_one([inventory_class(stubs.StubbedDPRetrieval)], activity)}
    row = rows["stub-dp-retrieval"]
    assert row["status"] == "retrieval-only"
    assert row["hooks"]["generate"]["dynamic"] == {"changed": 0, "calls": 4, "basis": "channel", "output_changed": 0,
                                                  "reordered": 0, "releases": 0}
    assert any("generate is inactive" in p for p in row["problems"])


def test_an_output_metric_on_a_stub_is_read_only_through_retrieval(stubs):
    inv = inventory_class(stubs.StubbedDPRetrieval)
    assert active_hooks(inv) == ["score_retrieval"]
