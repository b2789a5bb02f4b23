"""The red-team corpus: static and combined verdicts against the manifest, the honest trace, the
combined-verdict rules, and releasing context in the CLI and Table I."""

from __future__ import annotations

import json
import logging
import textwrap

import pytest
from audit_helpers import FIXTURES
from redteam_probe import evaluate, load_corpus, probe_traces
from rich.console import Console
from typer.testing import CliRunner

from ragleak.audit import AuditError, hook_activity, inventory_class, inventory_file
from ragleak.audit.dashboard import table_one
from ragleak.audit.inventory import HookFinding
from ragleak.audit.trace import HookActivity
from ragleak.audit.verdict import combine
from ragleak.cli import app
from ragleak.cli.tables import render_table_one
from ragleak.defenses import DEFENSES
from ragleak.defenses.base import Defense
from ragleak.report.ci import sarif
from ragleak.report.html import table_one_html


@pytest.fixture(scope="module", params=["class", "file"])
def results(request):
    logging.disable(logging.WARNING)  # the corpus's logging-only hooks log on every call
    try:
        return evaluate(request.param)
    finally:
        logging.disable(logging.NOTSET)


def test_the_manifest_lists_every_fixture_and_every_kind():
    redteam, rows = load_corpus()
    assert len(rows) >= 60
    listed = {r["cls"] for r in rows}
    defined = {n for n, v in vars(redteam).items() if isinstance(v, type) and issubclass(v, Defense)
               and v.__module__ == redteam.__name__ and not n.startswith("_")}
    assert listed == defined
    assert {r["expected"] for r in rows} == {"active", "pattern-limited", "inactive"}
    assert {r["hook"] for r in rows} == {"score_retrieval", "rewrite_context", "generate", "postprocess"}
    assert sum(r["releases_context"] for r in rows) >= 2


def test_static_accuracy_and_no_stub_reported_active(results):
    accuracy = sum(r["static_ok"] for r in results) / len(results)
    wrong = [(r["cls"], r["hook"], r["expected"], r["static"], r["evidence"]) for r in results if not r["static_ok"]]
    assert accuracy >= 0.95, wrong
    assert not [r for r in results if r["expected"] == "inactive" and r["static"] in {"active", "pattern-limited"}]


# Labels that predate issue 38's definition (benchmarks/bench_audit.py EFFECT_DEFINITION): each changes
# its own output but no channel (the top-k selected, the prompt, the answer), so the trace's
# per-channel effect reads it inactive.
BY_CHANNEL_INACTIVE = {("SliceAssignClip", "score_retrieval"), ("PopLast", "score_retrieval"),
                       ("SetattrScores", "score_retrieval"), ("FlattenScores", "score_retrieval")}


def test_combined_accuracy_is_total(results):
    def right(r):
        if (r["cls"], r["hook"]) in BY_CHANNEL_INACTIVE:
            return r["combined"] == "inactive" and "no channel changed" in r["reason"]
        return r["combined_ok"]

    wrong = [(r["cls"], r["hook"], r["expected"], r["combined"], r["reason"]) for r in results if not right(r)]
    assert not wrong


@pytest.mark.parametrize("route", ["class", "file"])
def test_the_held_out_set_reports_no_stub_active_and_combines_to_the_truth(route):
    logging.disable(logging.WARNING)
    try:
        rows = evaluate(route, "redteam_holdout")
    finally:
        logging.disable(logging.NOTSET)
    assert len(rows) >= 20
    assert not [r["cls"] for r in rows if r["expected"] == "inactive" and r["static"] in {"active", "pattern-limited"}]
    assert not [r["cls"] for r in rows if r["static"] != r["expected"] and r["static"] != "undetermined"]
    assert all(r["combined_ok"] for r in rows), [(r["cls"], r["combined"], r["reason"]) for r in rows
                                                 if not r["combined_ok"]]


def test_every_finding_keeps_evidence_and_a_location(results):
    for r in results:
        assert r["evidence"] and r["location"].rsplit(":", 1)[1].isdigit(), r
        if r["expected"] == "pattern-limited":
            assert r["pattern"], r


def test_pattern_limited_findings_name_their_pattern():
    redteam, _ = load_corpus()
    email = inventory_class(redteam.EmailSub).finding("postprocess")
    assert email.status == "pattern-limited" and email.pattern == "EMAIL"
    names = inventory_class(redteam.FixedNameList).finding("postprocess")
    assert "Alice Jones" in names.pattern


def test_the_trace_snapshots_inputs_and_separates_order_from_content():
    redteam, _ = load_corpus()
    mutated = hook_activity(probe_traces(redteam.SetattrScores()))["none"]["score_retrieval"]
    assert mutated.changed == mutated.calls  # in-place: compared against the snapshot, not the mutated objects
    reordered = hook_activity(probe_traces(redteam.ReverseOrder()))["none"]["score_retrieval"]
    assert (reordered.changed, reordered.reordered) == (0, reordered.calls)


def test_the_generate_reference_ignores_the_defenses_changes_to_the_generator():
    redteam, _ = load_corpus()
    settings = hook_activity(probe_traces(redteam.MutatesGeneratorParams()))["none"]["generate"]
    assert settings.changed == settings.calls
    plain = hook_activity(probe_traces(redteam.PlainWithBudget()))["none"]["generate"]
    assert plain.changed == 0


def test_released_context_is_flagged_in_the_trace():
    redteam, _ = load_corpus()
    traces = probe_traces(redteam.ReleasesContext())
    assert all(t.hook("generate").released for t in traces)
    assert not any(t.hook("postprocess").released for t in traces)  # postprocess added nothing
    assert not any(h.released for t in probe_traces(Defense()) for h in t.hooks)


def _finding(status: str, **kw) -> HookFinding:
    return HookFinding(defense="d", cls="D", hook="postprocess", status=status, declared=True,
                       evidence="why", location="x.py:1", defined_in="D", **kw)


def _act(changed: int, calls: int = 4, releases: int = 0) -> HookActivity:
    return HookActivity(defense="d", hook="postprocess", changed=changed, calls=calls, releases=releases)


@pytest.mark.parametrize("static, activity, verdict", [
    ("undetermined", None, "undetermined"),
    ("undetermined", _act(0), "inactive"),
    ("undetermined", _act(2), "active"),
    ("active", _act(0), "inactive"),
    ("active", _act(3), "active"),
    ("inactive", _act(0), "inactive"),
    ("inactive", _act(1), "active"),
    ("pattern-limited", _act(0), "pattern-limited"),
    ("active", _act(3, releases=1), "inactive"),
    ("active", _act(0, calls=0), "active"),  # no calls: no trace evidence
])
def test_combined_verdict_rules(static, activity, verdict):
    v = combine(_finding(static), activity)
    assert v.verdict == verdict, v.reason
    assert v.releases_context == bool(activity and activity.releases)


UNFOLLOWED = textwrap.dedent('''
    import textwrap

    from ragleak.defenses.base import Defense


    class Dedent(Defense):
        name = "dedent"
        hooks = frozenset({"postprocess"})

        def postprocess(self, query, answer, passages):
            return textwrap.dedent(answer)
''')


def test_an_unfollowed_call_is_undetermined_and_fails_strict(tmp_path):
    path = tmp_path / "dedent.py"
    path.write_text(UNFOLLOWED)
    (inv,) = inventory_file(path)
    finding = inv.finding("postprocess")
    assert finding.status == "undetermined" and "not followed" in finding.evidence
    assert "undetermined" in finding.problem
    result = CliRunner().invoke(app, ["audit", str(path), "--strict"])
    assert result.exit_code != 0 and isinstance(result.exception, AuditError)


RELEASER = textwrap.dedent('''
    from ragleak.defenses.base import Defense


    class Extractive(Defense):
        """Answers with the evidence itself."""

        name = "extractive"
        hooks = frozenset({"generate"})

        def generate(self, messages, passages, generator):
            return "\\n".join(p.text for p in passages)
''')


def test_a_generate_hook_that_returns_its_context_is_reported_as_releasing_it(tmp_path):
    path = tmp_path / "extractive.py"
    path.write_text(RELEASER)
    runner = CliRunner()
    data = json.loads(runner.invoke(app, ["audit", str(path), "--json"]).stdout)
    (row,) = data["defenses"]
    cell = row["hooks"]["generate"]
    assert row["status"] == "releases-context" and row["releases_context"]
    assert cell["releases_context"] and cell["verdict"] == "inactive"
    human = runner.invoke(app, ["audit", str(path)])
    assert "releases the retrieved context verbatim" in human.stdout
    strict = runner.invoke(app, ["audit", str(path), "--strict"])
    assert strict.exit_code != 0
    # Table I: terminal, HTML and SARIF
    console = Console(width=200, record=True)
    console.print(render_table_one(data["defenses"]))
    assert "releases ctx" in console.export_text()
    assert "releases context" in table_one_html(data["defenses"])
    rules = {r["ruleId"] for r in json.loads(sarif({"table_one": data["defenses"]}))["runs"][0]["results"]}
    assert "ragleak.releases-context" in rules


def test_table_one_with_the_run_shows_releasing_context_from_the_trace():
    redteam, _ = load_corpus()
    cls = type("Sources", (redteam.AnswerWithSources,), {"name": "sources"})
    rows = table_one([inventory_class(cls)], hook_activity(probe_traces(cls())))
    assert rows[0]["status"] == "releases-context"
    assert rows[0]["hooks"]["generate"]["dynamic"]["releases"] == 5


@pytest.mark.parametrize("name", DEFENSES.names())
def test_registered_defenses_pass_the_strict_audit(name):
    result = CliRunner().invoke(app, ["audit", name, "--strict", "--json"])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)["defenses"]
    assert all(c["verdict"] in {"active", "pattern-limited"} for c in row["hooks"].values() if c["declared"])


def test_the_corpus_file_is_where_the_findings_point():
    findings = {inv.cls: inv for inv in inventory_file(FIXTURES / "redteam.py")}
    loc = findings["TruncateInPlace"].finding("score_retrieval").location
    line = (FIXTURES / "redteam.py").read_text().splitlines()[int(loc.rsplit(":", 1)[1]) - 1]
    assert "del candidates" in line
