"""report.html: one self-contained page (inline CSS and SVG, no network) rendered from the summary."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

from ragleak.metrics import metric_title
from ragleak.records import HOOK_NAMES

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,'DejaVu Sans',sans-serif;margin:2rem auto;max-width:1100px;color:#1d2330;padding:0 1rem}
h1{font-size:1.6rem;margin-bottom:.2rem} h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #dde;padding-bottom:.2rem}
.sub{color:#667} table{border-collapse:collapse;margin:.6rem 0;font-size:12.5px} th,td{border:1px solid #dde;padding:3px 7px;text-align:left}
th{background:#f3f5fa} .active{background:#e3f6e6} .pattern-limited{background:#fff4d6} .pass-through{background:#fde2e2}
.not-overridden{color:#999} .no{color:#a33} .yes{color:#286b35} .cards{display:flex;gap:1rem;flex-wrap:wrap}
.card{border:1px solid #dde;border-radius:6px;padding:.6rem .9rem;min-width:9rem} .card b{display:block;font-size:1.4rem}
.fig{margin:.5rem 0} .nav{margin:.8rem 0;font-size:13px} .nav a{color:#2f5597;text-decoration:none} code{background:#f3f5fa;padding:0 3px;border-radius:3px}
"""


def _e(value: Any) -> str:
    return html.escape(str(value))


def _num(x: Any, digits: int = 3) -> str:
    return f"{x:.{digits}g}" if isinstance(x, float) else _e(x)


def _table(headers: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(rows_cell for rows_cell in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _td(text: Any, cls: str = "") -> str:
    return f'<td class="{cls}">{_e(text)}</td>' if cls else f"<td>{_e(text)}</td>"


def _interval(value: Any, ci: Any) -> str:
    if value is None:
        return "undefined"
    if not ci or ci[0] is None or ci[0] != ci[0]:
        return _num(value)
    return f"{_num(value)} [{_num(ci[0])}, {_num(ci[1])}]"


def _excluded_text(summary: dict[str, Any]) -> str:
    ex = summary["excluded"]
    partial = summary["status_counts"]["partial"]
    return (f"Aggregates leave out {ex['failed']} failed and {ex['error']} crashed cells; {partial} partial cells "
            "are included over their answered queries.")


def table_one_html(rows: list[dict]) -> str:
    out = []
    for row in rows:
        cells = [_td(row["defense"]), _td(row["status"])]
        for hook in HOOK_NAMES:
            c = row["hooks"][hook]
            dyn = c["dynamic"]
            text = c["static"] + ("" if not dyn else f" ({dyn['changed']}/{dyn['calls']})")
            cells.append(_td(text, c["static"]))
        cells.append(_td("; ".join(row["problems"]) or "-"))
        out.append(cells)
    return _table(["defense", "status", *HOOK_NAMES, "problems"], out)


def table_two_html(cells: list[dict]) -> str:
    rows = []
    for c in cells:
        interval = "-" if c.get("low") is None else f"[{_num(c['low'])}, {_num(c['high'])}]"
        rows.append([_td(c["defense"]), _td(metric_title(c["metric"])), _td(", ".join(c["channels"])), _td(_num(c["delta"])),
                     _td(interval), _td("yes" if c["interpretable"] else "no", "yes" if c["interpretable"] else "no"),
                     _td(c["reason"])])
    return _table(["defense", "metric", "channels", "delta vs none", "95% interval", "interpretable", "why"], rows)


def render(summary: dict[str, Any], figures: dict[str, str | None]) -> str:
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>ragleak report</title><style>{_CSS}</style></head><body>",
             "<h1>ragleak report</h1>",
             f"<p class='sub'>run <code>{_e(summary['run'])}</code></p>",
             "<div class='cards'>"]
    status = summary["status_counts"]
    for label, value in [("cells", summary["cells"]), ("ok", status["ok"]), ("partial", status["partial"]),
                         ("failed", status["failed"]), ("errors", status["error"]),
                         ("model calls", summary["model_calls"]), ("cache hit rate", f"{summary['cache_hit_rate']:.0%}"),
                         ("identical releases", summary["dedup"]["cells_with_identical_release"])]:
        parts.append(f"<div class='card'>{_e(label)}<b>{_e(value)}</b></div>")
    parts.append("</div><!--nav-->")
    parts.append("<h2 id='audit'>Audit dashboard — Table I: is each defense on the path it claims?</h2>")
    parts.append("<p class='sub'>static status from the source (ast); in brackets: calls in this run where the hook "
                 "changed its input / calls.</p>" + table_one_html(summary["table_one"]))
    parts.append("<h2 id='table-two'>Table II: leakage deltas against the undefended baseline</h2>")
    parts.append("<p class='sub'>a reading is interpretable only where an active hook of the defense reaches the "
                 f"channel the metric observes. {_excluded_text(summary)}</p>" + table_two_html(summary["table_two"]))
    parts.append("<h2 id='leakage'>Leakage per defense</h2>")
    for key, svg in figures.items():
        if key.startswith("bars:") and svg:
            parts.append(f"<div class='fig'>{svg}</div>")
    level_rows = [[_td(r["defense"]), _td(r["title"]), _td(_num(r["estimate"])), _td("-" if r["low"] is None else f"[{_num(r['low'])}, {_num(r['high'])}]"),
                   _td(r.get("interval_over", "cells")), _td(f"{r['n_unique']} of {r['n_runs']}"),
                   _td(", ".join(str(n) for n in r.get("n_per_cell", [])) or "-"), _td(r.get("partial_cells", 0)),
                   _td(r.get("excluded_failed", 0))] for r in summary["levels"]]
    parts.append(f"<p class='sub'>{_excluded_text(summary)} Cells that released exactly the same answers to the same "
                 f"queries are collapsed before resampling ({summary['dedup']['level_readings']} readings "
                 "collapsed).</p>")
    parts.append(_table(["defense", "metric", "mean", "95% interval", "resampled", "distinct cells used",
                         "n per cell", "partial cells", "failed cells left out"], level_rows))
    if figures.get("roc"):
        parts.append("<h2 id='membership'>Membership inference</h2>" + f"<div class='fig'>{figures['roc']}</div>")
    if summary.get("canaries"):
        parts.append("<h2 id='canaries'>Canaries recovered</h2>")
        parts.append("<p class='sub'>a canary counts when an answered query released it verbatim; interval: "
                     "Clopper-Pearson over the canaries.</p>")
        parts.append(_table(["cell", "recovered", "of", "rate"],
                            [[_td(r["label"]), _td("-" if r["recovered"] is None else r["recovered"]), _td(r["total"]),
                              _td(_interval(r["rate"], r["ci"]) if r["rate"] is not None else r["note"])]
                             for r in summary["canaries"]]))
    if summary.get("attribution"):
        parts.append("<h2 id='attribution'>Knowledge asymmetry: sentence attribution</h2>")
        parts.append("<p class='sub'>RAG answer vs the attacker's plain LLM, sentence by sentence; ground truth: "
                     "the sentence is drawn from the retrieved context. Intervals: bootstrap over queries.</p>")
        parts.append(_table(["cell", "sentences", "private", "ESR", "precision", "F1", "flag-all F1", "AUC"],
                            [[_td(r["label"]), _td(r["sentences"]), _td(r["private"]),
                              _td(_interval(r["esr"], r["esr_ci"])),
                              _td("-" if r.get("precision") is None else _num(r["precision"])),
                              _td(_interval(r["f1"], r["f1_ci"])),
                              _td("-" if r.get("flag_all_f1") is None else _num(r["flag_all_f1"])),
                              _td(_interval(r["auc"], r["auc_ci"]))]
                             for r in summary["attribution"]]))
    if summary.get("utility_curves"):
        parts.append("<h2 id='utility'>Private-RAG: utility against query index U(t)</h2>")
        parts.append("<p class='sub'>each relevant document is charged per query and retires after M charges; "
                     "quality is the ROUGE-L F1 of the private answer against the undefended answer to the same "
                     "query.</p>")
        if figures.get("utility"):
            parts.append(f"<div class='fig'>{figures['utility']}</div>")
        rows = [[_td(c["label"]), _td(p["t"]), _td(p["relevant"]), _td(p["charged"]), _td(p["active_docs"]),
                 _td("-" if p["quality"] is None else _num(p["quality"]))]
                for c in summary["utility_curves"] for p in c["points"]]
        parts.append(_table(["cell", "t", "relevant", "charged", "active documents", "quality"], rows))
    parts.append("<h2 id='guarantees'>Privacy guarantees: epsilon(T)</h2>")
    if figures.get("eps"):
        parts.append(f"<div class='fig'>{figures['eps']}</div>")
    g_rows = [[_td(g["defense"]), _td(g["epsilon_setting"] or "- (inert)"),
               _td(g["guarantee"]["unit"]["kind"]),
               _td(g["guarantee"]["scope"]["kind"]), _td(g["guarantee"]["boundary"]),
               _td(", ".join(f"T={p['queries']}: {_num(p['eps'])}" for p in g["curve"]) or "no formal guarantee")]
              for g in summary["guarantees"]]
    parts.append(_table(["defense", "grid eps", "unit", "scope", "boundary", "epsilon(T)"], g_rows))
    parts.append("<h2 id='cells'>All cells</h2>")
    cell_rows = [[_td(c["label"]), _td(c["status"]), _td(json.dumps(c["counts"])),
                  _td(json.dumps({metric_title(k): v for k, v in c["metrics"].items()})), _td(c["model_calls"]),
                  _td(c["cache_hits"]), _td(c["seconds"])] for c in summary["cells_table"]]
    parts.append(_table(["cell", "status", "queries", "metrics", "model calls", "cache hits", "seconds"], cell_rows))
    troubled = summary.get("failed", []) + summary.get("partial", [])
    if troubled:
        parts.append("<h2 id='faults'>Failed and partial cells</h2>")
        parts.append("<p class='sub'>failed: too few queries answered to read the cell; left out of every aggregate. "
                     "partial: some queries failed; the readings rest on the answered ones.</p>")
        parts.append(_table(["cell", "status", "queries", "answered", "refused", "failed"],
                            [[_td(c["label"]), _td(c["status"], "no"),
                              *[_td((c["counts"] or {}).get(k, "-")) for k in ("queries", "answered", "refused", "errors")]]
                             for c in troubled]))
    if summary["errors"]:
        parts.append("<h2 id='errors'>Errors</h2>" + _table(["cell", "error"], [[_td(e["label"]), _td(e["error"])] for e in summary["errors"]]))
    parts.append("<p class='sub'>Reproduce: <code>ragleak report RUN_DIR</code> over the same run directory.</p></body></html>")
    page = "".join(parts)
    return page.replace("<!--nav-->", _nav(page), 1)


_H2 = re.compile(r"<h2 id='([a-z-]+)'>(.*?)</h2>")


def _nav(page: str) -> str:
    """Links to the sections this report has (a section without data is not rendered)."""
    links = " · ".join(f"<a href='#{i}'>{title.split(':')[0].split(' — ')[0]}</a>" for i, title in _H2.findall(page))
    return f"<p class='nav'>{links}</p>"


def write(summary: dict[str, Any], figures: dict[str, str | None], path: Path) -> Path:
    from ragleak.files import atomic_write_text

    atomic_write_text(path, render(summary, figures))
    return path
