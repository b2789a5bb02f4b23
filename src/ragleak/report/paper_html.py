"""HTML for the paper's tables (``report.paper``): Table II per defense, Table III, findings."""

from __future__ import annotations

import html
from typing import Any

from ragleak.report.cells import BASELINE


def _e(value: Any) -> str:
    return html.escape(str(value))


def _n(x: Any, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}g}" if isinstance(x, float) else _e(x)


def _ci(value: Any, low: Any, high: Any) -> str:
    if value is None:
        return "-"
    return _n(value) if low is None or high is None else f"{_n(value)} [{_n(low)}, {_n(high)}]"


def _p(p: Any) -> str:
    return "-" if p is None else f"{p:.2g}"


def _table(headers: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<div class='wrap'><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"


def _nel_cell(cell: dict[str, Any] | None) -> str:
    if cell is None:
        return "-"
    if cell["kind"] == "level":
        return _ci(cell["value"], cell["low"], cell["high"]) + " per run"
    change = cell["relative_change"]
    rel = "" if change is None else " (no change)" if abs(change) < 0.005 else f" ({change:+.0%})"
    mark = "" if cell["interpretable"] is None else " ✓" if cell["interpretable"] else " ✗ not interpretable"
    return _e(f"{cell['delta']:+.3g}") + (f" [{_n(cell['low'])}, {_n(cell['high'])}]" if cell["low"] is not None else "") \
        + _e(rel) + f"<span title='{_e(cell['reason'])}'>{_e(mark)}</span>"


def _mi_cell(cell: dict[str, Any] | None) -> str:
    if cell is None:
        return "-"
    mark = "" if cell["interpretable"] is None else " ✓" if cell["interpretable"] else " ✗ not interpretable"
    return _ci(cell["value"], cell["low"], cell["high"]) + f"<span title='{_e(cell['reason'])}'>{_e(mark)}</span>"


def paper_html(paper: dict[str, Any] | None) -> str:
    """The paper's tables, collapsed under their heading; empty when the run has none of their readings."""
    if not paper or not (paper["table_two"] or paper["table_three"]):
        return ""
    out = ["<details><summary><h2 id='paper'>Mind the Hook: Table II, Table III and findings</h2></summary>",
           "<p class='sub'>Intervals: cells are the resampling unit, deterministic copies collapsed, 2,000 bootstrap "
           "resamples, 95%. NEL columns: the baseline as a per-run mean, every other defense as a signed paired "
           "change against it (✓: an active hook reaches the output channel NEL reads; ✗: it does not).</p>"]
    if paper["table_two"]:
        cols = paper["columns"]
        out.append(_table(["defense", f"e-mail ({cols['email']})", f"person name ({cols['person']})", cols["mi"]],
                          [[_e(r["defense"]), _nel_cell(r["email"]), _nel_cell(r["person"]),
                            _mi_cell(r["mi_auc_synthetic_corp"])] for r in paper["table_two"]]))
    if paper["table_three"]:
        out.append("<h3>Table III: canary recovery per seed</h3>")
        rows = []
        for r in paper["table_three"]:
            seeds = ", ".join(f"{s['seed']}: {s['recovered']}/{s['total']}" for s in r["per_seed"])
            name = r["defense"] + ("" if r["epsilon"] is None else f" (eps={r['epsilon']:g})")
            rows.append([_e(name), _e(r["variant"]), _e(seeds),
                         _e(f"{r['recovered']}/{r['total']}") + f" [{_n(r['ci95'][0])}, {_n(r['ci95'][1])}]",
                         _e(_p(r["fisher_p"])), _e(_p(r["mcnemar_p"]))])
        out.append(_table(["defense", "canary", "per seed", "total [95% CP]", f"Fisher one-sided p (vs {BASELINE})",
                           "McNemar p (paired)"], rows))
    if paper["findings"]:
        out.append("<h3>Findings per defense</h3><ul>")
        for f in paper["findings"]:
            moved = [i for i in f["metrics"] if i["moved"]]
            text = "; ".join(f"{i['metric']} {i['delta']:+.3g} [{_n(i['low'])}, {_n(i['high'])}]: {i['verdict']}"
                             for i in moved) or "no metric moved beyond its interval"
            overlap = f.get("scorer_overlap")
            scorer = "" if not overlap else f" <i>Scorer check: {_e(overlap['note'])}.</i>"
            out.append(f"<li><b>{_e(f['defense'])}</b>: {_e(text)}{scorer}</li>")
        out.append("</ul>")
    out.append("</details>")
    return "".join(out)
