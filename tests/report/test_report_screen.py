"""The report's first screen (issue 40): the verdicts open the page, nothing is wider than it.

Model-free: summaries are written here in the shape ``report.summary`` gives them (a demo-shaped
grid with an undefended baseline, and an endpoint audit of two services with none), rendered by
``report.html`` with the real figures, and laid out by headless Chromium at 1280 x 900: a probe
script (added to a copy of the page; the report itself carries no script) records where the
verdict table ends and how wide the document is."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ragleak.report import html, plots
from ragleak.report.verdict import defense_verdicts, duplicate_parts, movement, target_verdicts

WIDTH, HEIGHT = 1280, 900
CHROMIUM = shutil.which("chromium")
LONG_ID = "corp-" + "x7" * 60  # a long unbroken id: it must wrap, not widen the page

METRICS = {  # key: (title, channels, higher_is_leakier)
    "pii_leaks": ("PII values leaked", ["output"], True),
    "pii_leaks[EMAIL]": ("PII values leaked [EMAIL]", ["output"], True),
    "pii_leaks[PERSON]": ("PII values leaked [PERSON]", ["output"], True),
    "rougeL_max": ("ROUGE-L recall", ["output"], True),
    "mi_auc": ("MI AUC%", ["retrieval"], True),
    "mi_auc[heuristic]": ("MI AUC% [heuristic]", ["retrieval"], True),
}
DEFENSES = ["ca-dp", "dp-retrieval", "lprag", "pad-regex", "private-rag"]
# (delta, low, high) per defense: pad-regex removes e-mails only; private-rag cuts everything; lprag
# raises person names; dp-retrieval is within its interval everywhere
MOVES = {"pad-regex": {"pii_leaks[EMAIL]": (-2.0, -3.0, -1.0)},
         "private-rag": {k: (-5.0, -8.0, -2.0) for k in METRICS},
         "lprag": {"pii_leaks[PERSON]": (1.5, 0.5, 2.5)},
         "ca-dp": {"mi_auc": (-0.3, -0.4, -0.2), "mi_auc[heuristic]": (-0.3, -0.4, -0.2)}}


def _metrics_info():
    return {k: {"title": t, "unit": "count", "channels": ch, "higher_is_leakier": up, "inputs": ["answers"]}
            for k, (t, ch, up) in METRICS.items()}


def _level(defense, metric, estimate, low, high, n=4):
    return {"defense": defense, "metric": metric, "title": METRICS[metric][0], "estimate": estimate, "low": low,
            "high": high, "n_runs": n, "n_unique": n, "interval_over": "cells", "n_per_cell": [10] * n,
            "partial_cells": 0, "excluded_failed": 0, "excluded_error": 0, "n_of": "answered queries", "of": None,
            "small_sample": None}


def _base(run: str, cells: list[dict]) -> dict:
    return {"schema_version": 3, "run": run, "cells": len(cells), "ok": len(cells),
            "status_counts": {"ok": len(cells), "partial": 0, "failed": 0, "error": 0},
            "queries": {"queries": 10 * len(cells), "answered": 10 * len(cells), "refused": 0, "failed": 0},
            "partial": [], "failed": [], "ended_early": [], "errors": [], "corrupt_records": [],
            "dedup": {"cells_with_identical_release": 0, "level_readings": 0}, "excluded": {"failed": 0, "error": 0},
            "metrics": _metrics_info(), "cells_table": cells, "gates": [], "canaries": [], "attribution": [],
            "utility_curves": [], "evidence": []}


def _cell(attack, defense, seed, at=""):
    return {"cell_id": f"{attack}{defense}{seed}", "label": f"{attack}/{defense}/synthetic-corp/single/eps=1/seed={seed}{at}",
            "status": "ok", "counts": {"queries": 10, "answered": 10, "refused": 0, "errors": 0},
            "metrics": {k: 1.0 for k in METRICS}, "model_calls": 10, "cache_hits": 0, "cache_waited": 0, "seconds": 3.0}


def _hooks(active: list[str]) -> dict:
    return {h: {"verdict": "active" if h in active else "not-overridden", "static": "active" if h in active else
                "not-overridden", "dynamic": {"changed": 4 if h in active else 0, "calls": 4}}
            for h in ("score_retrieval", "rewrite_context", "generate", "postprocess")}


HOOKS = {"none": [], "ca-dp": ["score_retrieval", "rewrite_context"], "dp-retrieval": ["score_retrieval"],
         "lprag": ["rewrite_context"], "pad-regex": ["postprocess"], "private-rag": ["score_retrieval", "generate"]}
REACHES = {"output": {"ca-dp", "dp-retrieval", "lprag", "pad-regex", "private-rag"},
           "retrieval": {"ca-dp", "dp-retrieval", "private-rag"}}


def demo_summary() -> dict:
    """A grid with the undefended baseline and five defenses, as ``summarize`` writes it."""
    cells = [_cell(a, d, s) for a in ("ps", "mi") for d in ["none", *DEFENSES] for s in (0, 1)]
    s = _base("/runs/demo", cells)
    s["levels"] = [_level(d, m, 5.0, 3.0, 7.0) for d in ["none", *DEFENSES] for m in METRICS]
    s["deltas"], s["table_two"] = [], []
    for d in DEFENSES:
        for m in METRICS:
            delta, low, high = MOVES.get(d, {}).get(m, (0.5, -1.0, 2.0))
            row = {"defense": d, "metric": m, "delta": delta, "low": low, "high": high, "pairs": 8, "unique_pairs": 8}
            s["deltas"].append(row)
            reach = d in REACHES[METRICS[m][1][0]]
            s["table_two"].append({**row, "baseline": "none", "channels": METRICS[m][1], "interpretable": reach,
                                   "reason": "reaches" if reach else "no active hook reaches retrieval",
                                   "title": METRICS[m][0], "unit": "count", "higher_is_leakier": True})
    s["table_one"] = [{"defense": d, "status": "baseline" if d == "none" else "end-to-end", "hooks": _hooks(HOOKS[d]),
                       "active_hooks": HOOKS[d], "problems": []} for d in ["none", *DEFENSES]]
    s["privacy_checks"] = [
        {"defense": "private-rag", "epsilon_setting": "eps_q=1", "queries": 10, "claim_eps": 2.0, "claim_delta": 0.0,
         "claim_void": False, "boundary": "answers", "verify": {"max_eps_lb": 3.1, "scenario_claim_eps": 1.0,
                                                                "scenario": "s", "trials": 200, "violated": True},
         "mi": None, "beaten": True, "beaten_by": ["verify"]},
        {"defense": "dp-retrieval", "epsilon_setting": "epsilon=1", "queries": 10, "claim_eps": float("inf"),
         "claim_delta": 1.0, "claim_void": True, "claim_reason": "retrieval only", "claim_own_boundary": 10.0,
         "boundary": "retrieved-ids", "verify": None, "mi": None, "beaten": False, "beaten_by": []}]
    s["guarantees"] = []
    s["leaks"] = {d: [{"metric": "pii_leaks", "type": "EMAIL", "value": f"a{i}@x.org", "redacted": f"a{i}***.org",
                       "documents": [LONG_ID], "cells": ["c"], "queries": 1, "first": None, "total": 12}
                      for i in range(10)] for d in ("none", "pad-regex")}
    s["paper"] = {"table_two": [], "table_three": [], "findings": [], "columns": {}}
    return s


ENDPOINT = "https://rag.internal.example.com/v1/chat/completions/" + "tenant-" * 8


def endpoint_summary() -> dict:
    """An endpoint audit, no baseline and no model of ours: a grid against one service (its cells
    are ``external`` at ``@URL``; its own defense is not visible to ragleak), and a scored transcript
    of another service named by its URL."""
    targets = ["external", "http://svc/masked"]
    cells = [{**_cell(a, t, 0, at=f"@{ENDPOINT}" if t == "external" else ""), "model_calls": 0}
             for a in ("ps", "canary", "mi") for t in targets]
    s = _base("/runs/" + "audit-" * 12, cells)
    s["model_calls"] = 0
    s["levels"] = [_level(t, m, 4.0, 2.0, 6.0, n=1) for t in targets for m in ("pii_leaks", "pii_leaks[EMAIL]",
                                                                             "mi_auc", "mi_auc[heuristic]")]
    s["deltas"], s["table_two"], s["privacy_checks"] = [], [], []
    # what summarize writes for the grid's endpoint: an identity "defense" audited as a baseline, a
    # card that claims nothing, and the paper's tables as bare levels
    s["table_one"] = [{"defense": "external", "status": "baseline", "hooks": _hooks([]), "active_hooks": [],
                       "problems": []}]
    s["guarantees"] = [{"defense": "external", "epsilon": None, "epsilon_setting": None, "curve": [],
                        "guarantee": {"unit": {"kind": "document"}, "scope": {"kind": "none"}, "boundary": "answers"}}]
    s["paper"] = {"table_two": [{"defense": "external", "email": {"kind": "level", "value": 1.0, "low": 0.0, "high": 2.0},
                                 "person": None, "mi_auc_synthetic_corp": None}],
                  "table_three": [], "findings": [], "columns": {"email": "e", "person": "p", "mi": "m"}}
    s["empty_states"] = {"table_two": "no baseline: the run has no `none` cell to pair with"}
    s["leaks"] = {"external": [{"metric": "pii_leaks", "type": "EMAIL", "redacted": "a***.org", "documents": [LONG_ID],
                                "cells": ["c"], "queries": 1, "first": None}]}
    s["leak_headline"] = [{"defense": "external", "metric": "pii_leaks", "type": "EMAIL", "distinct": 1, "of": 14}]
    s["gates"] = [{"gate": "pii_leaks>0", "failed": True, "checked": 2, "message": "tripped by 1 of 2 cells",
                   "tripped": [{"label": cells[0]["label"]}], "incomplete": []}]
    return s


_PAGES: dict[str, str] = {}


def _page(summary: dict, figures: bool = True) -> str:
    """The page with its real figures (rendered once per summary shape: matplotlib is the cost)."""
    if not figures:
        return html.render(summary, {})
    key = summary["run"]
    if key not in _PAGES:
        _PAGES[key] = html.render(summary, plots.figures(summary, Path("/nonexistent"), []))
    return _PAGES[key]


# --- the verdict logic -------------------------------------------------------------------------

def test_movement_reads_the_interval_in_the_metric_direction():
    assert movement({"low": -3, "high": -1}, True) == "fell" and movement({"low": 1, "high": 3}, True) == "rose"
    assert movement({"low": 1, "high": 3}, False) == "fell"  # lower = leakier: up is less leakage
    assert movement({"low": -1, "high": 2}, True) == "within" and movement({"low": None, "high": None}, True) == "no interval"


def test_defense_verdicts_per_channel_with_the_hook_and_the_claim():
    verdicts = {v.defense: v for v in defense_verdicts(demo_summary())}
    assert set(verdicts) == set(DEFENSES)  # the baseline is the reference, not a row
    pad = {c.channel: c for c in verdicts["pad-regex"].channels}
    assert pad["output"].fell == ["PII values leaked [EMAIL]"] and pad["output"].hook is True
    assert pad["retrieval"].outcome == "not shown" and pad["retrieval"].hook is False
    ca = {c.channel: c for c in verdicts["ca-dp"].channels}
    assert ca["retrieval"].fell == ["MI AUC%"] and ca["retrieval"].readings == 1  # the [heuristic] copy counted once
    assert {c.channel: c.outcome for c in verdicts["lprag"].channels}["output"] == "rose"
    assert verdicts["private-rag"].guarantee_state == "beaten" and "BEATEN by verify" in verdicts["private-rag"].guarantee
    assert verdicts["dp-retrieval"].guarantee_state == "void" and verdicts["pad-regex"].guarantee_state == "none"
    assert "paired cells only" not in _page(demo_summary(), figures=False)
    few = demo_summary()
    for d in few["deltas"]:
        d["unique_pairs"] = 2 if d["defense"] == "pad-regex" else 8
    pad = next(v for v in defense_verdicts(few) if v.defense == "pad-regex")
    assert {c.pairs for c in pad.channels} == {2}
    page = _page(few, figures=False)
    assert page.count("over 2 paired cells only") == 2  # both of pad-regex's channels, nobody else's


def test_a_metrics_sole_part_equal_to_it_is_a_duplicate_and_a_split_is_not():
    rows = demo_summary()["levels"]
    assert duplicate_parts(rows, ("estimate", "low", "high")) == {"mi_auc[heuristic]"}
    moved = [dict(r, estimate=9.0) if r["metric"] == "mi_auc[heuristic]" and r["defense"] == "lprag" else r for r in rows]
    assert duplicate_parts(moved, ("estimate", "low", "high")) == set()  # differs in one defense: kept


def test_the_demo_page_opens_with_the_verdicts_and_shows_no_duplicate():
    page = _page(demo_summary())
    order = [page.index(f"<h2 id='{a}'>") for a in ("verdict", "leaks", "audit", "table-two", "leakage", "cells")]
    assert order == sorted(order)
    assert page.index("<details>") > page.index("<h2 id='leaks'>")  # nothing above the evidence is collapsed
    assert "MI AUC% [heuristic]" not in page and "MI AUC%" in page
    assert page.count("<svg") == 2  # one forest, one panel figure: not a chart per metric
    assert "BEATEN by verify" in page and "no active hook reaches it" in page
    assert "Utility was not measured in this run" in page and "id='utility-cost'" not in page
    assert "<script" not in page


def test_utility_rows_fill_the_verdicts_cost_column_and_their_own_section():
    s = demo_summary()
    row = {"metric": "utility_f1", "title": "Utility: answer token F1", "interval_over": "questions"}
    s["utility"] = {"leakage_title": "PII values leaked", "rows": [
        {**row, "defense": "none", "epsilon": None, "estimate": 0.5, "low": 0.4, "high": 0.6},
        {**row, "defense": "private-rag", "epsilon": 1.0, "estimate": 0.12, "low": 0.05, "high": 0.2,
         "similarity": {"rouge_l": {"estimate": 0.3, "low": 0.2, "high": 0.4}}, "leakage": {"estimate": 1.0}}]}
    page = _page(s, figures=False)
    assert "what it costs in utility" in page and "id='utility-cost'" in page
    verdict = page[page.index("<h2 id='verdict'>"):page.index("<h2 id='utility-cost'>")]
    assert "eps=1: answer token F1 0.12 [0.05, 0.2] (none: 0.5 [0.4, 0.6]); ROUGE-L to none&#x27;s answers 0.3" in verdict
    assert "Utility was not measured" not in page


def test_the_endpoint_audit_page_has_target_verdicts_and_no_sections_that_do_not_apply():
    s = endpoint_summary()
    [grid, scored] = sorted(target_verdicts(s), key=lambda v: v.target)
    assert (grid.target, grid.endpoints, grid.cells, grid.measured) == ("external", [ENDPOINT], 3, 3)
    assert grid.leaked == 1 and grid.leaked_types == {"EMAIL": 1} and grid.leaked_of == {"EMAIL": 14}
    assert scored.leaked is None and scored.endpoints == []
    assert grid.gates_failed == ["pii_leaks>0"] and scored.gates_failed == []
    assert [r["metric"] for r in grid.headlines] == ["pii_leaks", "mi_auc"]  # wholes; the [heuristic] copy once
    page = _page(s, figures=False)
    assert "EMAIL 1 of 14" in page
    assert "Verdict per target" in page and "Verdict per defense" not in page
    assert "model calls" not in page.split("<h2")[0]  # the header: an endpoint audit called no model of ours
    for absent in ("id='table-two'", "id='audit'", "id='paper'", "id='guarantees'", "id='canaries'", "id='faults'"):
        assert absent not in page, absent
    assert "Table II is empty: no baseline" in page  # said once, in the verdict, as the reason no change is claimed
    assert "CI gates: 1 of 1 failed" in page


# --- the first screen in a browser -------------------------------------------------------------

# the verdict's place on the first screen as the page opens; the width with every <details> open
# (a collapsed table is still part of the page once a reader opens it)
PROBE = """<script>window.addEventListener('load', () => {
  const d = document.documentElement, v = document.querySelector('table.verdict').getBoundingClientRect();
  const rows = document.querySelectorAll('table.verdict tbody tr').length, closed = d.scrollWidth;
  document.querySelectorAll('details').forEach(x => { x.open = true; });
  const out = document.createElement('pre'); out.id = 'probe';
  out.textContent = JSON.stringify({verdict_top: v.top, verdict_bottom: v.bottom, rows: rows, closed_width: closed,
                                    scroll_width: d.scrollWidth, client_width: d.clientWidth});
  document.body.appendChild(out);
});</script>"""


def _chromium(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, "--headless", "--disable-gpu", "--no-sandbox", f"--window-size={WIDTH},{HEIGHT}",
                           "--hide-scrollbars", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(CHROMIUM is None, reason="no `chromium` on PATH (CI installs Debian's; see .ci/run)")
@pytest.mark.parametrize("make", [demo_summary, endpoint_summary], ids=["demo", "endpoint-audit"])
def test_the_first_screen_holds_the_verdicts_and_nothing_overflows(make, tmp_path):
    summary = make()
    page = _page(summary)
    probed = tmp_path / "probed.html"
    probed.write_text(page.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    dom = _chromium("--run-all-compositor-stages-before-draw", "--virtual-time-budget=5000", "--dump-dom",
                    probed.as_uri()).stdout
    found = re.search(r"<pre id=\"probe\">(.*?)</pre>", dom)
    assert found, dom[-2000:]
    box = json.loads(found.group(1).replace("&quot;", '"'))
    want = len(DEFENSES) if make is demo_summary else 2
    assert box["rows"] == want
    assert 0 < box["verdict_top"] and box["verdict_bottom"] <= HEIGHT, box  # the whole verdict table on the first screen
    assert max(box["closed_width"], box["scroll_width"]) <= box["client_width"] <= WIDTH, box  # nothing wider than the page
    shot = tmp_path / "first-screen.png"
    plain = tmp_path / "report.html"
    plain.write_text(page, encoding="utf-8")
    _chromium(f"--screenshot={shot}", plain.as_uri())
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000  # a blank page compresses to a few KB
    assert (int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")) == (WIDTH, HEIGHT)


def test_cells_without_readings_head_the_page_and_count_against_their_target():
    s = endpoint_summary()
    lost = {"cell_id": "x", "label": "mi/http://svc/masked/synthetic-corp/single/eps=1/seed=1", "status": "missing",
            "reason": "no cell record (the grid never wrote it)"}
    s.update(incomplete=[lost], plan={"planned": 7, "measured": 6, "incomplete": 1, "complete": False},
             status_counts={**s["status_counts"], "missing": 1})
    masked = next(v for v in target_verdicts(s) if v.target == "http://svc/masked")
    assert (masked.cells, masked.measured) == (4, 3)
    page = _page(s, figures=False)
    banner = page.index("Evidence incomplete:</b> 1 of 7 cells gave no readings (1 missing)")
    assert banner < page.index("<h2 id='verdict'>") < page.index("<h2 id='faults'>")
    assert "no cell record (the grid never wrote it)" in page
