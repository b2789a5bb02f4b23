"""report.html: one self-contained page (inline CSS and SVG, no network) rendered from the summary."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

from ragleak.metrics import metric_title
from ragleak.records import HOOK_NAMES
from ragleak.report.paper_html import paper_html

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,'DejaVu Sans',sans-serif;margin:2rem auto;max-width:1100px;color:#1d2330;padding:0 1rem}
h1{font-size:1.6rem;margin-bottom:.2rem} h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #dde;padding-bottom:.2rem}
.sub{color:#667} table{border-collapse:collapse;margin:.6rem 0;font-size:12.5px} th,td{border:1px solid #dde;padding:3px 7px;text-align:left}
th{background:#f3f5fa} .active{background:#e3f6e6} .pattern-limited{background:#fff4d6} .inactive,.releases-context{background:#fde2e2} .undetermined{background:#eee6fa}
.not-overridden{color:#999} .no{color:#a33} .yes{color:#286b35} .cards{display:flex;gap:1rem;flex-wrap:wrap}
.card{border:1px solid #dde;border-radius:6px;padding:.6rem .9rem;min-width:9rem} .card b{display:block;font-size:1.4rem}
.beaten{background:#fde2e2;color:#a11;font-weight:bold} .fig{margin:.5rem 0} .warn{color:#8a5a00;background:#fff4d6;padding:2px 6px;margin:.3rem 0}
.void{border-left:4px solid #c0392b;background:#fde2e2;padding:.3rem .8rem;margin:.4rem 0}
.assume{border-left:4px solid #c9a227;background:#fff8e1;padding:.3rem .8rem;margin:.4rem 0} h3{font-size:1rem} .nav{margin:.8rem 0;font-size:13px} .nav a{color:#2f5597;text-decoration:none} code{background:#f3f5fa;padding:0 3px;border-radius:3px}
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


def metric_label(key: str) -> str:
    """A metric's title with its unit and direction: "PII values leaked [EMAIL] (distinct corpus PII
    values released (count); higher = more leakage)"."""
    from ragleak.metrics import METRICS, metric_info, split_key

    if split_key(key)[0] not in METRICS.names():
        return key
    info = metric_info(key)
    direction = "higher = more leakage" if info["higher_is_leakier"] else "lower = more leakage"
    return f"{info['title']} ({info['unit']}; {direction})"


def _warn(text: str) -> str:
    return f"<p class='warn'>{_e(text)}</p>"


def _metric_warnings(summary: dict[str, Any], prefix: str) -> str:
    """The sample-size warnings of the readings of metric ``prefix`` (and its parts)."""
    rows = [w for w in summary.get("sample_warnings", []) if w["metric"].split("[")[0] == prefix]
    return "".join(_warn(f"{w['label']}: {metric_title(w['metric'])} {w['message']}") for w in rows)


def leaks_html(summary: dict[str, Any], show_leaks: bool) -> str:
    """Per defense: the top leaked items, their documents, and a link to the query that leaked them."""
    leaks = summary.get("leaks") or {}
    if not leaks:
        return ("<p class='sub'>no leaked PII value or canary was found in the answered queries of any measured "
                "cell (the PII metric needs the corpus the target indexed; canaries need a canary attack or a "
                "manifest).</p>")
    out = [f"<p class='sub'>values {'shown in full (--show-leaks)' if show_leaks else 'redacted; rerun `ragleak report RUN --show-leaks` to see them'}; "
           "documents: the indexed documents that hold the value; query: the first query that released it.</p>"]
    for defense, items in leaks.items():
        total = items[0]["total"] if items else 0
        out.append(f"<h3>{_e(defense)} <span class='sub'>(top {len(items)} of {total} leaked items)</span></h3>")
        rows = []
        for it in items:
            first = it["first"]
            link = (f"<td><a href='#{_e(first['anchor'])}'>query {_e(first['query'])} of {_e(first['label'])}</a></td>"
                    if first else _td("-"))
            rows.append([_td(it["metric"]), _td(it["type"]), f"<td><code>{_e(it['value'] if show_leaks else it['redacted'])}</code></td>",
                         _td(", ".join(it["documents"]) or "-"), _td(len(it["cells"])), _td(it["queries"]), link])
        out.append(_table(["metric", "type", "value", "documents", "cells", "queries", "leaked by"], rows))
    return "".join(out)


def evidence_html(summary: dict[str, Any], show_leaks: bool) -> str:
    rows = []
    for ev in summary.get("evidence", []):
        snippet = ev["snippet"] if show_leaks else (ev["snippet_redacted"] or "(the value appears in another format; "
                                                                              "--show-leaks shows the answer)")
        rows.append(f"<tr id='{_e(ev['anchor'])}'>{_td(ev['label'])}{_td(ev['query_index'])}{_td(ev['query'])}"
                    f"{_td(snippet)}<td><code>{_e(ev['transcript'])}</code></td></tr>")
    head = "".join(f"<th>{h}</th>" for h in ("cell", "query", "question", "answer (around the leak)", "transcript"))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def table_one_html(rows: list[dict]) -> str:
    out = []
    for row in rows:
        cells = [_td(row["defense"]), _td(row["status"])]
        for hook in HOOK_NAMES:
            c = row["hooks"][hook]
            dyn = c["dynamic"]
            verdict = c.get("verdict", c["static"])
            text = ("releases context" if c.get("releases_context") else verdict) + \
                ("" if verdict == c["static"] else f" [static: {c['static']}]") + \
                ("" if not dyn else f" ({dyn['changed']}/{dyn['calls']})")
            cells.append(_td(text, "releases-context" if c.get("releases_context") else verdict))
        cells.append(_td("; ".join(row["problems"]) or "-"))
        out.append(cells)
    return _table(["defense", "status", *HOOK_NAMES, "problems"], out)


def table_two_html(cells: list[dict]) -> str:
    rows = []
    for c in cells:
        interval = "-" if c.get("low") is None else f"[{_num(c['low'])}, {_num(c['high'])}]"
        rows.append([_td(c["defense"]), _td(metric_label(c["metric"])), _td(", ".join(c["channels"])), _td(_num(c["delta"])),
                     _td(interval), _td("yes" if c["interpretable"] else "no", "yes" if c["interpretable"] else "no"),
                     _td(c["reason"])])
    return _table(["defense", "metric", "channels", "delta vs none", "95% interval", "interpretable", "why"], rows)


def render(summary: dict[str, Any], figures: dict[str, str | None], show_leaks: bool = False) -> str:
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
                 "changed its input / calls.</p>")
    parts.append(table_one_html(summary["table_one"]) if summary["table_one"] else _warn(
        "Table I is empty: no cell ran a registered defense whose source can be audited (scored transcripts of an "
        "endpoint are grouped by the target's name; `ragleak audit FILE.py` audits a defense's source)"))
    parts.append("<h2 id='table-two'>Table II: leakage deltas against the undefended baseline</h2>")
    parts.append("<p class='sub'>a reading is interpretable only where an active hook of the defense reaches the "
                 f"channel the metric observes. {_excluded_text(summary)}</p>")
    empty = summary.get("empty_states", {})
    parts.append(table_two_html(summary["table_two"]) if summary["table_two"]
                 else _warn("Table II is empty: " + empty.get("table_two", "no deltas")))
    parts.append(paper_html(summary.get("paper")))
    parts.append("<h2 id='leakage'>Leakage per defense</h2>")
    for key, svg in figures.items():
        if key.startswith("bars:") and svg:
            parts.append(f"<div class='fig'>{svg}</div>")
    level_rows = [[_td(r["defense"]), _td(metric_label(r["metric"])),
                   _td(_num(r["estimate"]) + ("" if r.get("of") is None else f" {r['of']}")),
                   _td("-" if r["low"] is None else "no spread (every reading equal)" if r["low"] == r["high"]
                       else f"[{_num(r['low'])}, {_num(r['high'])}]"),
                   _td(r.get("interval_over", "cells")), _td(f"{r['n_unique']} of {r['n_runs']}"),
                   _td((", ".join(str(n) for n in r.get("n_per_cell", [])) or "-") + (f" {r['n_of']}" if r.get("n_of") else "")),
                   _td(r.get("small_sample") or "-", "no" if r.get("small_sample") else ""),
                   _td(r.get("partial_cells", 0)), _td(r.get("excluded_failed", 0))] for r in summary["levels"]]
    parts.append(f"<p class='sub'>{_excluded_text(summary)} Cells that released exactly the same answers to the same "
                 f"queries are collapsed before resampling ({summary['dedup']['level_readings']} readings "
                 "collapsed).</p>")
    parts.append(_table(["defense", "metric", "mean", "95% interval", "resampled", "distinct cells used",
                         "n per cell", "sample-size warning", "partial cells", "failed cells left out"], level_rows)
                 if level_rows else _warn("no leakage reading: " + empty.get("levels", "no metric applied")))
    parts.append("<h2 id='leaks'>What leaked: top items per defense</h2>" + leaks_html(summary, show_leaks))
    if summary.get("evidence"):
        parts.append("<h2 id='evidence'>Evidence: the queries that leaked them</h2>" + evidence_html(summary, show_leaks))
    if figures.get("roc"):
        parts.append("<h2 id='membership'>Membership inference</h2>" + f"<div class='fig'>{figures['roc']}</div>"
                     + _metric_warnings(summary, "mi_auc"))
    if summary.get("canaries"):
        parts.append("<h2 id='canaries'>Canaries recovered</h2>")
        parts.append("<p class='sub'>a canary counts when an answered query released it verbatim; interval: "
                     "Clopper-Pearson over the canaries.</p>")
        parts.append(_metric_warnings(summary, "canary_recovery"))
        parts.append(_table(["cell", "recovered", "of", "rate"],
                            [[_td(r["label"]), _td("-" if r["recovered"] is None else r["recovered"]), _td(r["total"]),
                              _td(_interval(r["rate"], r["ci"]) if r["rate"] is not None else r["note"])]
                             for r in summary["canaries"]]))
    if summary.get("attribution"):
        parts.append("<h2 id='attribution'>Knowledge asymmetry: sentence attribution</h2>")
        parts.append("<p class='sub'>RAG answer vs the attacker's plain LLM, sentence by sentence; ground truth: "
                     "the sentence is drawn from the retrieved context. Intervals: bootstrap over queries.</p>")
        parts.append(_metric_warnings(summary, "attribution_esr") + _metric_warnings(summary, "attribution_f1")
                     + _metric_warnings(summary, "attribution_auc"))
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
    for g in summary.get("guarantee_warnings", []):  # next to the curves they qualify
        if g["warnings"]:
            setting = f" ({g['epsilon_setting']})" if g.get("epsilon_setting") else ""
            parts.append(f"<div class='{'void' if g['void'] else 'assume'}'><b>{_e(g['defense'] + setting)}</b><ul>"
                         + "".join(f"<li>{_e(w)}</li>" for w in g["warnings"]) + "</ul></div>")
    g_rows = [[_td(g["defense"]), _td(g["epsilon_setting"] or "- (inert)"),
               _td(g["guarantee"]["unit"]["kind"]),
               _td(g["guarantee"]["scope"]["kind"]), _td(g["guarantee"]["boundary"]),
               _td(f"VOID: {g['void_reason']}" if g.get("void") else
                   ", ".join(f"T={p['queries']}: {_num(p['eps'])}" for p in g["curve"]) or "no formal guarantee")]
              for g in summary["guarantees"]]
    if g_rows:
        # a card holds on its own release boundary; a box above may void the same card for the
        # answers (a retrieval-only mechanism says nothing about generated text), and both are true
        parts.append("<p class='sub'>Each epsilon(T) holds for what its boundary column names and nothing "
                     "past it: a retrieval-only card shows values here for the retrieved ids while a box "
                     "above says it is void for the answers.</p>")
    parts.append(_table(["defense", "grid eps", "unit", "scope", "boundary", "epsilon(T)"], g_rows) if g_rows else _warn(
        "no guarantee to show: no measured cell states one (a scored transcript does not say how its target was "
        "configured, so none is claimed for it)"))
    if summary.get("privacy_checks"):
        parts.append(privacy_checks_html(summary["privacy_checks"]))
    if summary.get("gates"):
        parts.append("<h2 id='gates'>CI gates (--fail-if)</h2>")
        parts.append(_table(["gate", "result", "cells checked", "detail"],
                            [[_td(g["gate"]), _td("FAIL" if g["failed"] else "pass", "no" if g["failed"] else "yes"),
                              _td(g["checked"]), _td(g["message"])] for g in summary["gates"]]))
    parts.append("<h2 id='cells'>All cells</h2>")
    cell_rows = [[_td(c["label"]), _td(c["status"]), _td(json.dumps(c["counts"])),
                  _td(json.dumps({metric_title(k): v for k, v in c["metrics"].items()})), _td(c["model_calls"]),
                  _td(c["cache_hits"]), _td(c.get("cache_waited", 0)), _td(c["seconds"])] for c in summary["cells_table"]]
    parts.append(_table(["cell", "status", "queries", "metrics", "model calls", "cache hits",
                         "of them waited", "seconds"], cell_rows))
    troubled = summary.get("failed", []) + summary.get("partial", [])
    if troubled:
        parts.append("<h2 id='faults'>Failed and partial cells</h2>")
        parts.append("<p class='sub'>failed: too few queries answered to read the cell; left out of every aggregate. "
                     "partial: some queries failed; the readings rest on the answered ones.</p>")
        parts.append(_table(["cell", "status", "queries", "answered", "refused", "failed"],
                            [[_td(c["label"]), _td(c["status"], "no"),
                              *[_td((c["counts"] or {}).get(k, "-")) for k in ("queries", "answered", "refused", "errors")]]
                             for c in troubled]))
    if summary.get("ended_early"):
        parts.append("<h2 id='ended-early'>Cells whose attack ended before its budget</h2>")
        parts.append("<p class='sub'>the attack stopped on its own (it had nothing new to send); the readings rest on "
                     "the queries it sent, not on the budget.</p>")
        parts.append(_table(["cell", "queries sent", "budget"],
                            [[_td(c["label"]), _td(c["counts"]["queries"]), _td(c["counts"]["budget"])]
                             for c in summary["ended_early"]]))
    if summary["errors"]:
        parts.append("<h2 id='errors'>Errors</h2>" + _table(["cell", "error"], [[_td(e["label"]), _td(e["error"])] for e in summary["errors"]]))
    parts.append("<p class='sub'>Reproduce: <code>ragleak report RUN_DIR</code> over the same run directory.</p></body></html>")
    page = "".join(parts)
    return page.replace("<!--nav-->", _nav(page), 1)


def _claim_text(row: dict) -> str:
    if row["claim_void"]:
        return f"void on answers ({row['claim_reason']}); own boundary {row['boundary']}: {_num(row['claim_own_boundary'])}"
    return f"{_num(row['claim_eps'])} (delta {_num(row['claim_delta'])})"


def _verify_text(v: dict | None) -> str:
    if v is None:
        return "not run (ragleak verify DEFENSE --json RUN_DIR/verify/DEFENSE.json)"
    return (f"{_num(v['max_eps_lb'])} vs per-query claim {_num(v['scenario_claim_eps'])} "
            f"({v['scenario']}, {v['trials']} trials/world)")


def _mi_text(mi: dict | None) -> str:
    if mi is None:
        return "no membership cells"
    return (f"{_num(mi['eps_lb'])} ({mi['scorer']}, TPR {_num(mi['tpr'])} at FPR {_num(mi['fpr'])}, "
            f"{mi['members']}+{mi['nonmembers']} candidates, {mi['cells']} cell(s), Bonferroni over {mi['thresholds']} "
            "thresholds)")


def privacy_checks_html(rows: list[dict]) -> str:
    """Claimed eps(T) for the run's query count against the verify and membership lower bounds;
    a claim either beats is flagged in red."""
    body = []
    for row in rows:
        mi = row["mi"]
        ceiling = "-" if mi is None or "tpr_ceiling" not in mi else f"{_num(mi['tpr_ceiling'])} at FPR {_num(mi['fpr'])}"
        verdict = ("BEATEN by " + " and ".join(row["beaten_by"])) if row["beaten"] else "not beaten"
        cls = "beaten" if row["beaten"] else ""
        body.append([_td(row["defense"], cls), _td(row["epsilon_setting"] or "-"), _td(row["queries"]),
                     _td(_claim_text(row)), _td(_verify_text(row["verify"]), "beaten" if row["verify"] and row["verify"]["violated"] else ""),
                     _td(_mi_text(mi), "beaten" if "membership attack" in row["beaten_by"] else ""),
                     _td(ceiling), _td(verdict, cls)])
    return ("<h3>Claims against evidence</h3><p class='sub'>claimed epsilon(T) at the run's query count, as seen on "
            "answers; the <code>ragleak verify</code> lower bound (neighbouring corpora, Clopper-Pearson, Bonferroni "
            "over events) and the lower bound implied by the run's own membership attack (best threshold, "
            "Clopper-Pearson, Bonferroni over thresholds), with the TPR the claim allows at the attack's FPR. "
            "Red: a lower bound above the claim.</p>"
            + _table(["defense", "grid eps", "T", "claimed eps(T)", "verify eps_lb", "membership eps_lb",
                      "MI TPR ceiling", "verdict"], body))


_H2 = re.compile(r"<h2 id='([a-z-]+)'>(.*?)</h2>")


def _nav(page: str) -> str:
    """Links to the sections this report has (a section without data is not rendered)."""
    links = " · ".join(f"<a href='#{i}'>{title.split(':')[0].split(' — ')[0]}</a>" for i, title in _H2.findall(page))
    return f"<p class='nav'>{links}</p>"


def write(summary: dict[str, Any], figures: dict[str, str | None], path: Path, show_leaks: bool = False) -> Path:
    from ragleak.files import atomic_write_text

    atomic_write_text(path, render(summary, figures, show_leaks=show_leaks))
    return path
