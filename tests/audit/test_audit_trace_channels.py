"""Dynamic N of M from traces, trace loading, the hook->channel map and the interpretable rule."""

from __future__ import annotations

import json

import pytest
from audit_helpers import load_fixture, run_pipeline

from ragleak.audit import AuditError, hook_activity, inventory_class, load_traces
from ragleak.audit.channels import HOOK_REACH, active_hooks, interpretable, reach
from ragleak.defenses.base import Defense


@pytest.fixture(scope="module")
def table():
    return load_fixture("hook_table")


def test_pattern_limited_hook_shows_as_a_rate(table):
    cls = type("SsnFilter", (table.RegexFilter,), {"name": "ssn-filter"})
    traces = run_pipeline(cls())
    # the filter fires exactly on the calls whose top 2 held the passage with an SSN (doc "b")
    fired = sum("b#0" in [i.passage_id for i in sorted(t.rescored, key=lambda i: -i.score)[:2]] for t in traces)
    assert 0 < fired < len(traces)
    activity = hook_activity(traces)["ssn-filter"]
    assert (activity["rewrite_context"].changed, activity["rewrite_context"].calls) == (fired, 4)
    assert activity["rewrite_context"].rate == pytest.approx(fired / 4)
    assert activity["score_retrieval"].label == "0/4"


def test_baseline_changes_nothing_and_activity_is_per_defense(table):
    traces = run_pipeline(Defense()) + run_pipeline(type("N", (table.NoisyScores,), {"name": "noisy"})())
    activity = hook_activity(traces)
    assert set(activity) == {"none", "noisy"}
    assert all(a.changed == 0 and a.calls == 4 for a in activity["none"].values())
    assert activity["noisy"]["score_retrieval"].changed == 4


def test_load_traces_reads_every_layout(tmp_path, table):
    traces = run_pipeline(Defense())
    dumped = [t.model_dump(mode="json") for t in traces]
    (tmp_path / "one.json").write_text(json.dumps(dumped[0]))
    (tmp_path / "list.json").write_text(json.dumps(dumped[1:3]))
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "transcript.json").write_text(json.dumps({"steps": [{"query": "q", "trace": dumped[3]}]}))
    (tmp_path / "lines.jsonl").write_text("\n".join(json.dumps({"trace": d}) for d in dumped) + "\n")
    (tmp_path / "notes.txt").write_text("ignored")
    loaded = load_traces(tmp_path)
    assert len(loaded) == 8 and {t.query for t in loaded} == {t.query for t in traces}


def test_load_traces_errors(tmp_path):
    with pytest.raises(AuditError, match="not a directory"):
        load_traces(tmp_path / "nope")
    with pytest.raises(AuditError, match="no traces"):
        load_traces(tmp_path)
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(AuditError, match="not valid JSON"):
        load_traces(tmp_path)
    (tmp_path / "bad.json").write_text(json.dumps({"query": "q", "prompt": "p", "hooks": "wrong"}))
    with pytest.raises(AuditError, match="does not validate"):
        load_traces(tmp_path)


def test_hook_reach_follows_the_pipeline_order():
    assert HOOK_REACH["score_retrieval"] == {"retrieval", "context", "output"}
    assert HOOK_REACH["rewrite_context"] == {"context", "output"}
    assert HOOK_REACH["generate"] == HOOK_REACH["postprocess"] == {"output"}
    assert reach([]) == frozenset()
    assert reach(["generate", "rewrite_context"]) == {"context", "output"}


def test_interpretable_rule():
    assert interpretable({"retrieval"}, ["score_retrieval"])[0]
    ok, reason = interpretable({"retrieval"}, ["postprocess", "generate"])
    assert not ok and "do not reach retrieval" in reason
    assert interpretable({"output"}, ["postprocess"])[0]
    assert interpretable({"retrieval", "output"}, ["postprocess"])[0]  # any overlap
    assert interpretable({"context"}, ["rewrite_context"])[0]
    assert not interpretable({"context"}, ["generate"])[0]
    assert interpretable({"output"}, []) == (False, "no active hook")


def test_active_hooks_need_a_change_in_the_run_when_traces_are_given(table):
    inv = inventory_class(table.RegexFilter)
    assert active_hooks(inv) == ["rewrite_context"]
    never = hook_activity(run_pipeline(table.RegexFilter(), queries=("garden hours",)))["none"]
    assert active_hooks(inv, never) == []
