"""Evidence is complete or the report says so (issue 40): a run whose cell records were deleted,
corrupted, crashed and failed (HTTP 401, HTTP 500, a timeout, a refused connection) fails every
gate, exit 1, and names each cell with its reason in the terminal, report.html, JUnit and SARIF;
the same gate passes on the complete run. Gates persist across reports; a failed cell shows no
reading; with every cell failed "What leaked" says nothing was measured; every leaked item and
every canary (recovered or not, with the query that released it) is listed, redacted by default.

Model-free: canary transcripts scored into a run folder with the store's own API
(``grid.scored.write_run``, ``RunStore.write_cell``, ``grid.store.error_record``).
"""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from typer.testing import CliRunner

from ragleak.attacks.base import CorpusView, QueryRecord, Transcript
from ragleak.context import RunContext
from ragleak.grid.scored import scored, write_run
from ragleak.grid.store import RunStore, error_record
from ragleak.measure import run_attack
from ragleak.metrics.pii import redact

EMAIL_CANARY = "operator_7_f3a9c1@acmetest-internal.canary"
NAME_CANARY = "Quorvath Melisandre"
GATE = "canary_recovery>0.99"  # no complete cell recovers every canary: this gate passes on complete evidence

FAILURES = {  # target -> the error each of its queries got, as the HTTP target words it
    "http://svc/auth": "EndpointFailure: http://svc/auth answered HTTP 401: 'unauthorized'",
    "http://svc/broken": "EndpointFailure: could not reach http://svc/broken after 3 attempts: HTTP 500: 'boom'",
    "http://svc/slow": "EndpointFailure: could not reach http://svc/slow after 1 attempts: ReadTimeout: timed out",
    "http://svc/down": ("EndpointFailure: could not reach http://svc/down after 1 attempts: ConnectError: "
                        "[Errno 111] Connection refused"),
}
REASONS = {"http://svc/auth": "HTTP 401", "http://svc/broken": "HTTP 500", "http://svc/slow": "timeout",
           "http://svc/down": "connection refused", "http://svc/gone": "record missing",
           "http://svc/garbled": "record corrupt", "http://svc/crash": "crashed"}


def _transcript(target: str, answers: list[str | None], error: str | None = None) -> Transcript:
    queries = [QueryRecord(index=i, query=f"what is the contact in record {i}?", answer=a,
                           error=error if a is None else None) for i, a in enumerate(answers)]
    return Transcript(attack="canary", attack_version="2", threat_model="black-box", params={}, seed=0,
                      budget=len(queries), target=target, exposes_retrieved_ids=False, queries=queries,
                      errors=sum(q.error is not None for q in queries))


def _run(folder: Path, transcripts: list[Transcript]) -> Path:
    src = folder / "transcripts-in"
    src.mkdir(parents=True)
    for i, t in enumerate(transcripts):
        (src / f"{i:02d}.json").write_text(t.to_json(), encoding="utf-8")
    items = scored(sorted(src.glob("*.json")), CorpusView(secrets=[EMAIL_CANARY, NAME_CANARY]), "corpus", None)
    out = folder / "run"
    write_run(out, items, [run_attack(item.transcript, None, RunContext(), []) for item in items])
    return out


def _good() -> list[Transcript]:
    return [_transcript("http://svc/open", ["no idea", f"write to {EMAIL_CANARY}", "nothing"]),
            _transcript("http://svc/closed", ["no", "no", "no"])]


def _cells(run: Path) -> dict[str, str]:
    """target -> cell id."""
    return {r.spec.defense: r.cell_id for r in RunStore(run).records()}


@pytest.fixture(scope="module")
def faulty(tmp_path_factory) -> Path:
    ok = _good() + [_transcript(t, ["fine"] * 3) for t in ("http://svc/gone", "http://svc/garbled", "http://svc/crash")]
    run = _run(tmp_path_factory.mktemp("faulty"), ok + [_transcript(t, [None] * 3, e) for t, e in FAILURES.items()])
    store, ids = RunStore(run), _cells(run)
    store.record_path(ids["http://svc/gone"]).unlink()  # deleted
    store.record_path(ids["http://svc/garbled"]).write_text('{"cell_id": "trunc', encoding="utf-8")  # corrupted
    crashed = store.read(ids["http://svc/crash"])
    store.write_cell(error_record(crashed.spec, RuntimeError("index build failed: disk full\nsecond line"), 0.1))
    return run


def _report(run: Path, *args: str):
    from ragleak.cli import app
    from ragleak.cli import report as report_cli

    report_cli.console.width = 400  # rich folds table cells to the terminal's width
    return CliRunner().invoke(app, ["report", str(run), *args])


def _outputs(run: Path, result) -> dict:
    """What one report wrote, read at once (a later report replaces the files)."""
    return {"exit": result.exit_code, "terminal": result.output,
            "summary": json.loads((run / "summary.json").read_text()),
            "page": (run / "report.html").read_text(encoding="utf-8"),
            "junit": ET.parse(run / "junit.xml").getroot(),
            "sarif": json.loads((run / "ragleak.sarif").read_text())["runs"][0]["results"],
            "files": {name: (run / name).read_text(encoding="utf-8")
                      for name in ("summary.json", "report.html", "ragleak.sarif", "junit.xml", "cells.jsonl")}}


@pytest.fixture(scope="module")
def faulty_report(faulty) -> dict:
    return _outputs(faulty, _report(faulty, "--fail-if", GATE, "--fail-if", "canary_recovery>=0"))


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> tuple[Path, dict]:
    run = _run(tmp_path_factory.mktemp("good"), _good())
    return run, _outputs(run, _report(run, "--fail-if", GATE))


def test_the_gate_passes_on_complete_evidence(good):
    _, out = good
    assert out["exit"] == 0, out["terminal"]
    assert f"ok gate {GATE}: passed on 2 cells" in out["terminal"]
    assert out["summary"]["plan"] == {"planned": 2, "measured": 2, "incomplete": 0, "complete": True}


def test_every_missing_corrupt_crashed_or_failed_cell_fails_every_gate_with_its_reason(faulty_report):
    out = faulty_report
    assert out["exit"] == 1, out["terminal"]
    summary = out["summary"]
    assert summary["plan"] == {"planned": 9, "measured": 2, "incomplete": 7, "complete": False}
    assert all(g["failed"] and len(g["incomplete"]) == 7 for g in summary["gates"]) and len(summary["gates"]) == 2
    assert {c["status"] for c in summary["incomplete"]} == {"missing", "corrupt", "error", "failed"}
    by_target = {target: next(c for c in summary["incomplete"] if target in c["label"]) for target in REASONS}
    assert by_target["http://svc/auth"]["failure"]["status"] == 401
    assert by_target["http://svc/broken"]["failure"]["status"] == 500
    assert by_target["http://svc/crash"]["reason"] == "crashed: RuntimeError: index build failed: disk full"

    cases = {c.get("name"): c for s in out["junit"] if s.get("name") == "cells" for c in s}
    for target, reason in REASONS.items():
        row = by_target[target]
        assert reason in row["reason"], (target, row)
        # the terminal, the page, JUnit and SARIF each name the cell and its reason
        assert any(row["label"] in line and reason in line for line in out["terminal"].splitlines()), target
        assert row["label"] in out["page"] and reason in out["page"], target
        case = cases[row["label"]]
        outcome = case.find("failure") if row["status"] == "failed" else case.find("error")
        assert outcome is not None and reason in outcome.get("message"), target
        assert any(r["ruleId"] == f"ragleak.cell-{row['status']}" and row["label"] in r["message"]["text"]
                   and reason in r["message"]["text"] for r in out["sarif"]), target
    assert sum(r["ruleId"] == "ragleak.gate" for r in out["sarif"]) == 2
    gate_suite = next(s for s in out["junit"] if s.get("name") == "gates")
    assert gate_suite.get("failures") == "2" and "7 of 9 planned cells gave no readings" in out["terminal"]


def test_a_failed_cell_shows_no_reading(faulty_report):
    failed = [c for c in faulty_report["summary"]["cells_table"] if c["status"] in ("failed", "error")]
    assert len(failed) == 5 and all(c["metrics"] == {} and c["reason"] for c in failed)
    for case in (c for s in faulty_report["junit"] if s.get("name") == "cells" for c in s):
        names = {p.get("name") for p in case.iter("property")}
        if case.find("failure") is not None or case.find("error") is not None:
            assert not {n for n in names if n.startswith(("canary_recovery", "pii_leaks"))}, case.get("name")


def test_gates_persist_across_reports(faulty, faulty_report):
    result = _report(faulty, "--show-leaks")  # README's next step: the gates are kept, not dropped
    assert result.exit_code == 1, result.output
    summary = json.loads((faulty / "summary.json").read_text())
    assert [g["gate"] for g in summary["gates"]] == [GATE, "canary_recovery>=0"]
    assert sum(r["ruleId"] == "ragleak.gate"
               for r in json.loads((faulty / "ragleak.sarif").read_text())["runs"][0]["results"]) == 2


def test_with_every_cell_failed_nothing_was_measured(tmp_path):
    run = _run(tmp_path, [_transcript(t, [None] * 3, e) for t, e in FAILURES.items()])
    result = _report(run, "--fail-if", GATE)
    assert result.exit_code == 1
    summary = json.loads((run / "summary.json").read_text())
    assert summary["leak_state"] == "not_measured" and "nothing was measured" in summary["empty_states"]["leaks"]
    page = (run / "report.html").read_text(encoding="utf-8")
    assert "nothing was measured" in page and "no leaked PII value" not in page
    assert "nothing was measured" in result.output


def test_every_leak_and_every_canary_is_listed_redacted_and_in_sarif(good):
    run, out = good
    for name, body in out["files"].items():  # not even the canaries not recovered
        assert EMAIL_CANARY not in body and NAME_CANARY not in body, name
    summary = out["summary"]
    canaries = {c["redacted"]: c for c in summary["canary_list"]["http://svc/open"]}
    found, missed = canaries[redact(EMAIL_CANARY)], canaries[redact(NAME_CANARY)]
    assert found["recovered"] and found["type"] == "email" and found["first"]["query"] == 1
    assert found["first"]["query_text"] == "what is the contact in record 1?"
    assert not missed["recovered"] and missed["type"] == "name" and missed["first"] is None
    assert summary["canary_totals"] == {"http://svc/closed": {"recovered": 0, "planted": 2},
                                        "http://svc/open": {"recovered": 1, "planted": 2}}
    head = {(h["defense"], h["type"]): h for h in summary["leak_headline"]}
    assert head[("http://svc/open", "CANARY")]["distinct"] == 1
    leaks = [r for r in out["sarif"] if r["ruleId"] == "ragleak.leak.canary_recovery"]
    assert len(leaks) == 1 and redact(EMAIL_CANARY) in leaks[0]["message"]["text"]
    _report(run, "--show-leaks")
    raw = json.loads((run / "summary.json").read_text())
    assert {c["value"] for c in raw["canary_list"]["http://svc/open"]} == {EMAIL_CANARY, NAME_CANARY}
