"""The report shows what leaked (model-free): transcripts scored into a run, then reported.

Items with their documents and the query that leaked them, redacted unless --show-leaks;
sample-size warnings; an empty Table II that says why; guarantee-card warnings next to the
epsilon(T) plot; --fail-if gates in the summary, SARIF and JUnit."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from ragleak.attacks.base import QueryRecord, Transcript
from ragleak.context import RunContext
from ragleak.defenses import DEFENSES
from ragleak.grid.scored import scored, scoring_corpus, write_run
from ragleak.measure import run_attack
from ragleak.metrics.pii import redact
from ragleak.report import html
from ragleak.report.build import build_report
from ragleak.report.evidence import guarantee_warnings
from ragleak.report.gates import parse_gate

SECRET = "Kx7!mera-42"
EMAIL = "dana.whitfield@orbisfreight.com"


@pytest.fixture
def corpus(tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "hr.txt").write_text(f"Personnel file. Dana Whitfield joined Orbis Freight. E-mail {EMAIL}, "
                                   "phone (415) 273-9981.")
    (folder / "it.md").write_text(f"IT handover: the VPN password is {SECRET}.")
    return folder


def _transcript(target: str, answers: list[str]) -> Transcript:
    queries = [QueryRecord(index=i, query=f"question {i}?", answer=a) for i, a in enumerate(answers)]
    return Transcript(attack="ps", attack_version="1", threat_model="black-box", params={}, seed=0,
                      budget=len(queries), target=target, exposes_retrieved_ids=False, queries=queries)


@pytest.fixture
def run(tmp_path, corpus):
    folder = tmp_path / "transcripts"
    folder.mkdir()
    (folder / "open.json").write_text(_transcript("http://svc/open", [
        f"Write to {EMAIL} or call (415) 273-9981.", f"The VPN password is {SECRET}."]).to_json())
    (folder / "masked.json").write_text(_transcript("http://svc/masked", [
        "Write to <EMAIL> or call <PHONE>.", f"The VPN password is {SECRET}."]).to_json())
    passages, label, digest = scoring_corpus(corpus)
    out = tmp_path / "run"
    items = scored(sorted(folder.glob("*.json")), None, label, digest)
    write_run(out, items, [run_attack(item.transcript, None, RunContext(), passages) for item in items])
    return out


def test_report_lists_leaked_values_with_documents_and_queries(run):
    paths = build_report(run, gates=[parse_gate("pii_leaks>0"), parse_gate("canary_recovery>0")])
    text = Path(paths["summary"]).read_text()
    summary = json.loads(text)
    leaks = {d: {(i["type"], i["redacted"]): i for i in items} for d, items in summary["leaks"].items()}
    assert set(leaks) == {"http://svc/open", "http://svc/masked"}
    assert leaks["http://svc/open"][("EMAIL", redact(EMAIL))]["documents"] == ["hr.txt"]
    assert ("EMAIL", redact(EMAIL)) not in leaks["http://svc/masked"]  # masked, so not leaked
    secret = leaks["http://svc/masked"][("SECRET", redact(SECRET))]
    assert secret["documents"] == ["it.md"] and secret["first"]["query"] == 1
    page = Path(paths["report"]).read_text()
    assert "hr.txt" in page and "it.md" in page
    assert f"id='{secret['first']['anchor']}'" in page and f"href='#{secret['first']['anchor']}'" in page
    # redacted by default in every file a CI job keeps, not only the page ...
    for name in ("report", "summary", "sarif", "junit", "cells"):
        body = Path(paths[name]).read_text()
        assert SECRET not in body and EMAIL not in body, name
    assert secret["redacted"] in page and "value" not in secret and summary["redacted"]
    assert all("snippet" not in ev and ev["snippet_redacted"] for ev in summary["evidence"])
    full_paths = build_report(run, show_leaks=True)
    full = Path(full_paths["report"]).read_text()
    assert SECRET in full and EMAIL in full  # ... and shown with --show-leaks
    raw = json.loads(Path(full_paths["summary"]).read_text())
    assert {i["value"] for i in raw["leaks"]["http://svc/open"]} >= {SECRET, EMAIL}


def test_sample_sizes_units_empty_table_two_and_the_leak_headline_explain_themselves(run):
    summary = json.loads(Path(build_report(run)["summary"]).read_text())
    assert "no baseline" in summary["empty_states"]["table_two"]
    level = next(lv for lv in summary["levels"] if lv["metric"] == "pii_leaks[EMAIL]")
    assert level["n_of"] == "answered queries" and level["of"] == "of 1" and "< 10" in level["small_sample"]
    assert any(w["metric"] == "pii_leaks" and w["n"] == 2 for w in summary["sample_warnings"])
    page = Path(build_report(run)["report"]).read_text()
    assert "Table II is empty: no baseline" in page
    assert "distinct corpus PII values released (count); higher = more leakage" in page

    # every leaked item is listed; the headline is the union of distinct values per type
    heads = {(h["defense"], h["metric"], h["type"]): h for h in summary["leak_headline"]}
    # the open service released the e-mail, the phone number and the password; the masked one only the password
    assert heads[("http://svc/open", "pii_leaks", "EMAIL")]["distinct"] == 1
    assert heads[("http://svc/open", "pii_leaks", "EMAIL")]["of"] == 1
    assert heads[("http://svc/masked", "pii_leaks", "EMAIL")]["distinct"] == 0
    assert heads[("http://svc/masked", "pii_leaks", "SECRET")]["distinct"] == 1
    for defense, items in summary["leaks"].items():
        assert len(items) == sum(h["distinct"] for (d, _, _), h in heads.items() if d == defense)
    assert summary["leak_state"] == "leaked"


def test_gates_trip_and_go_into_sarif_and_junit(run):
    paths = build_report(run, gates=[parse_gate("pii_leaks>0"), parse_gate("pii_leaks[EMAIL]>=5"),
                                     parse_gate("canary_recovery>0")])
    gates = {g["gate"]: g for g in json.loads(Path(paths["summary"]).read_text())["gates"]}
    assert gates["pii_leaks>0"]["failed"] and len(gates["pii_leaks>0"]["tripped"]) == 2
    assert not gates["pii_leaks[EMAIL]>=5"]["failed"] and gates["pii_leaks[EMAIL]>=5"]["checked"] == 2
    assert gates["canary_recovery>0"]["failed"] and gates["canary_recovery>0"]["checked"] == 0  # unchecked
    sarif = json.loads(Path(paths["sarif"]).read_text())
    messages = [r["message"]["text"] for r in sarif["runs"][0]["results"] if r["ruleId"] == "ragleak.gate"]
    assert len(messages) == 2 and any("tripped by 2 of 2 cells" in m for m in messages)
    suite = next(s for s in ET.parse(paths["junit"]).getroot() if s.get("name") == "gates")
    assert suite.get("tests") == "3" and suite.get("failures") == "2"


@pytest.mark.parametrize("defense", ["ca-dp", "dp-retrieval"])
def test_void_and_assumption_warnings_sit_next_to_the_epsilon_curves(defense):
    g = DEFENSES.get(defense)().guarantee().model_dump(mode="json")
    rows = [{"defense": defense, "epsilon": 1.0, "epsilon_setting": "eps=1", "guarantee": g,
             "curve": [{"queries": 1, "eps": 1.0}]}]
    warnings = guarantee_warnings(rows)
    assert warnings[0]["void"] and warnings[0]["warnings"][0].startswith("VOID")
    # a card with fields of its own (adjacency, assumptions) is read as it is
    carded = guarantee_warnings([{**rows[0], "card": {"void": True, "void_reason": "answer-level boundary",
                                                       "assumptions": ["no reset between queries"]}}])
    assert carded[0]["warnings"] == ["VOID: answer-level boundary", "assumption: no reset between queries"]
    summary = {"guarantee_warnings": warnings, "guarantees": rows}
    page = html.render(_minimal(summary), {"eps": "<svg id='eps-plot'></svg>"})
    plot, warning, table = page.index("eps-plot"), page.index(warnings[0]["warnings"][0][:40]), page.index("grid eps")
    assert plot < warning < table


def _minimal(extra):
    return {"run": "r", "cells": 0, "status_counts": {"ok": 0, "partial": 0, "failed": 0, "error": 0},
            "model_calls": 0, "cache_hit_rate": 0.0, "dedup": {"cells_with_identical_release": 0, "level_readings": 0},
            "table_one": [], "table_two": [], "levels": [], "excluded": {"failed": 0, "error": 0}, "guarantees": [],
            "cells_table": [], "errors": [], **extra}


def test_report_html_shows_ca_dp_and_dp_retrieval_void_and_assumption_warnings_by_their_curves(tmp_path, corpus):
    """Cells of both defenses recorded as a grid cell records them (``measured_record`` with the
    defense's own guarantee), reported by ``build_report``: each card's VOID line, its assumptions
    in words and its adjacency sit between the epsilon(T) heading and the guarantees table."""
    from ragleak.grid.spec import CellSpec, GridConfig
    from ragleak.grid.store import RunStore, measured_record
    passages, label, digest = scoring_corpus(corpus)
    specs = [CellSpec(attack="ps", defense=d, corpus=label, epsilon=1.0, budget=1, corpus_digest=digest)
             for d in ("ca-dp", "dp-retrieval")]
    store = RunStore(tmp_path / "run")
    store.init(GridConfig(name="void", attacks=["ps"], defenses=[s.defense for s in specs], corpora=[label],
                          epsilons=[1.0]), specs)
    for spec in specs:
        defense = DEFENSES.get(spec.defense)(**spec.defense_kwargs())
        transcript = _transcript(spec.defense, ["Nothing to say."])
        metrics = run_attack(transcript, None, RunContext(), passages).metrics
        store.write(measured_record(spec, transcript, metrics, defense, 0.5))
    paths = build_report(tmp_path / "run")
    summary = json.loads(Path(paths["summary"]).read_text())
    page = Path(paths["report"]).read_text()
    section = page[page.index("<h2 id='guarantees'>"):page.index("<th>grid eps</th>")]
    for defense in ("ca-dp", "dp-retrieval"):
        [card] = [w for w in summary["guarantee_warnings"] if w["defense"] == defense]
        assert card["void"] and card["warnings"][0].startswith("VOID: ")
        start = section.index(f"<b>{defense} ({card['epsilon_setting']})</b>")
        assert section.index("<div class='fig'><svg") < start  # under the epsilon(T) plot
        box = section[start:]
        box = box[:box.index("</div>")]
        assert "VOID: the DP claim covers which documents are retrieved" in box  # the answer-level boundary
        assert "assumption &#x27;pool-covers-corpus&#x27;" in box and "assumption &#x27;one-unit-per-document&#x27; met" in box
        assert "adjacency: substitution" in box
        assert "{&#x27;name&#x27;" not in box  # an assumption in words, never a record's repr
    assert "assumption &#x27;budget-scope&#x27; met: every query answered with retrieval is charged" in section
