"""report.html: one self-contained page (inline CSS and SVG, no network) rendered from the summary."""

from __future__ import annotations

import html
import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from ragleak.metrics import metric_title
from ragleak.records import HOOK_NAMES
from ragleak.report.cells import BASELINE
from ragleak.report.evidence import ITEM_METRICS
from ragleak.report.paper_html import paper_html
from ragleak.report.verdict import (MIN_PAIRS, ChannelVerdict, DefenseVerdict, defense_verdicts, duplicate_parts,
                                    endpoint_targets, has_baseline, target_verdicts, utility_rows, without_duplicates)

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,'DejaVu Sans',sans-serif;margin:1.2rem auto;max-width:1180px;color:#1d2330;padding:0 1rem}
h1{font-size:1.5rem;margin:0 0 .1rem} h2{font-size:1.15rem;margin-top:1.6rem;border-bottom:1px solid #dde;padding-bottom:.2rem}
.sub{color:#667} table{border-collapse:collapse;margin:.5rem 0;font-size:12.5px} th,td{border:1px solid #dde;padding:3px 7px;text-align:left;vertical-align:top}
td,th,li,p{overflow-wrap:break-word} .ids,.verdict b{overflow-wrap:anywhere} code{background:#f3f5fa;padding:0 3px;border-radius:3px;word-break:break-all}
th{background:#f3f5fa} .active{background:#e3f6e6} .pattern-limited{background:#fff4d6} .inactive,.releases-context{background:#fde2e2} .undetermined{background:#eee6fa}
.not-overridden{color:#999} .no{color:#a33} .yes{color:#286b35}
.beaten{background:#fde2e2;color:#a11;font-weight:bold} .fig{margin:.5rem 0} .fig svg{max-width:100%;height:auto} .warn{color:#8a5a00;background:#fff4d6;padding:2px 6px;margin:.3rem 0}
.void{border-left:4px solid #c0392b;background:#fde2e2;padding:.3rem .8rem;margin:.4rem 0}
.assume{border-left:4px solid #c9a227;background:#fff8e1;padding:.3rem .8rem;margin:.4rem 0} h3{font-size:1rem} .nav{margin:.4rem 0;font-size:13px} .nav a{color:#2f5597;text-decoration:none}
.wrap{overflow-x:auto;max-width:100%} .banner{border-left:4px solid #c0392b;background:#fde2e2;padding:.3rem .8rem;margin:.4rem 0}
.verdict{width:100%} .verdict td{font-size:13px} .verdict td:first-child{min-width:10rem;max-width:24rem}
.fell{color:#2e7d32;font-weight:bold} .rose{color:#c62828;font-weight:bold} .within{color:#5f6570} .side{color:#8a5a00;font-weight:bold}
.g-beaten{background:#fde2e2} .g-void{background:#fff4d6} .g-verified{background:#e3f6e6}
details{margin:.3rem 0} details>summary{cursor:pointer} details>summary h2{display:inline-block;border:0;margin:.6rem 0 .2rem}
"""


def _e(value: Any) -> str:
    return html.escape(str(value))


def _num(x: Any, digits: int = 3) -> str:
    return f"{x:.{digits}g}" if isinstance(x, float) else _e(x)


def _table(headers: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(rows_cell for rows_cell in row) + "</tr>" for row in rows)
    return f"<div class='wrap'><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"


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
    if summary.get("leak_state") == "not_measured":  # no cell measured: nothing can be said, not "nothing leaked"
        return f"<p class='warn'>{_e((summary.get('empty_states') or {}).get('leaks', 'nothing was measured'))}</p>"
    if not leaks:
        return ("<p class='sub'>no leaked PII value or canary was found in the answered queries of any measured "
                "cell (the PII metric needs the corpus the target indexed; canaries need a canary attack or a "
                "manifest).</p>")
    out = [f"<p class='sub'>values {'shown in full (--show-leaks)' if show_leaks else 'redacted; rerun `ragleak report RUN --show-leaks` to see them'}; "
           "documents: the indexed documents that hold the value; query: the first query that released it.</p>"]
    heads = defaultdict(list)
    for h in summary.get("leak_headline") or []:
        if h.get("distinct"):
            heads[h["defense"]].append(f"{h['type']} {h['distinct']}" + ("" if h.get("of") is None else f" of {h['of']}"))
    for defense, items in leaks.items():
        total = items[0].get("total", len(items)) if items else 0
        listed = f"{total} leaked items" if total == len(items) else f"top {len(items)} of {total} leaked items"
        union = f": distinct values {', '.join(heads[defense])}" if heads.get(defense) else ""
        # one line per defense; its items open under it (the verdict above is the first read)
        out.append(f"<details><summary><b>{_e(defense)}</b> <span class='sub'>({_e(listed)}{_e(union)})</span>"
                   "</summary>")
        rows = []
        for it in items:
            first = it["first"]
            link = (f"<td class='ids'><a href='#{_e(first['anchor'])}'>query {_e(first['query'])} of {_e(first['label'])}</a></td>"
                    if first else _td("-"))
            rows.append([_td(it["metric"]), _td(it["type"]), f"<td><code>{_e(it['value'] if show_leaks else it['redacted'])}</code></td>",
                         _td(", ".join(it["documents"]) or "-", "ids"), _td(len(it["cells"])), _td(it["queries"]), link])
        out.append(_table(["metric", "type", "value", "documents", "cells", "queries", "leaked by"], rows) + "</details>")
    return "".join(out)


def evidence_html(summary: dict[str, Any], show_leaks: bool) -> str:
    rows = []
    for ev in summary.get("evidence", []):
        snippet = ev["snippet"] if show_leaks else (ev["snippet_redacted"] or "(the value appears in another format; "
                                                                              "--show-leaks shows the answer)")
        rows.append(f"<tr id='{_e(ev['anchor'])}'>{_td(ev['label'])}{_td(ev['query_index'])}{_td(ev['query'])}"
                    f"{_td(snippet)}<td><code>{_e(ev['transcript'])}</code></td></tr>")
    head = "".join(f"<th>{h}</th>" for h in ("cell", "query", "question", "answer (around the leak)", "transcript"))
    return f"<div class='wrap'><table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"


def table_one_html(rows: list[dict]) -> str:
    from ragleak.audit.dashboard import dynamic_text

    out = []
    for row in rows:
        cells = [_td(row["defense"]), _td(row["status"])]
        for hook in HOOK_NAMES:
            c = row["hooks"][hook]
            dyn = c["dynamic"]
            verdict = c.get("verdict", c["static"])
            text = ("releases context" if c.get("releases_context") else verdict) + \
                ("" if verdict == c["static"] else f" [static: {c['static']}]") + \
                ("" if not dyn else f" ({dynamic_text(dyn).strip()})")
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


def _section(anchor: str, title: str, body: str, collapsed: bool = False) -> str:
    """A section; ``collapsed`` puts it in a closed <details> whose summary is its heading."""
    head = f"<h2 id='{anchor}'>{title}</h2>"
    return f"<details><summary>{head}</summary>{body}</details>" if collapsed else head + body


def _fig(svg: str | None) -> str:
    return f"<div class='fig'>{svg}</div>" if svg else ""


_STATUSES = ("ok", "partial", "failed", "error", "missing", "corrupt")


def _header(summary: dict[str, Any]) -> str:
    """Title, the run, and one status line that names only what the run has (an endpoint audit
    that called no model says nothing of model calls)."""
    status = summary.get("status_counts") or {}
    counts = ", ".join(f"{status[k]} {k}" for k in _STATUSES if status.get(k))
    planned = (summary.get("plan") or {}).get("planned")
    cells = f"{planned} cells planned" if planned and planned != summary.get("cells") else f"{summary.get('cells', 0)} cells"
    bits = [cells + (f" ({counts})" if counts else "")]
    queries = summary.get("queries") or {}
    if queries.get("queries"):
        bits.append(f"{queries['queries']} queries ({queries.get('answered', 0)} answered)")
    if summary.get("model_calls"):
        bits.append(f"{summary['model_calls']} model calls, cache hit rate {summary.get('cache_hit_rate', 0):.0%}")
    same = (summary.get("dedup") or {}).get("cells_with_identical_release")
    if same:
        bits.append(f"{same} cell{'s' if same > 1 else ''} released the same as another")
    return (f"<h1>ragleak report</h1><p class='sub'>run <code>{_e(summary.get('run', ''))}</code> · "
            + _e(" · ".join(bits)) + "</p>")


def _banners(summary: dict[str, Any]) -> str:
    """What the verdicts must be read with: cells that gave no reading, and failed CI gates."""
    out = []
    status = summary.get("status_counts") or {}
    lost = {k: status.get(k, 0) for k in ("failed", "error", "missing", "corrupt") if status.get(k)}
    corrupt = len(summary.get("corrupt_records") or [])
    if corrupt and not lost.get("corrupt"):
        lost["unreadable"] = corrupt
    if lost:
        planned = (summary.get("plan") or {}).get("planned")
        n = sum(lost.values())
        what = ", ".join(f"{v} {'crashed' if k == 'error' else k}" for k, v in lost.items())
        out.append(f"<p class='banner'><b>Evidence incomplete:</b> {n}{'' if not planned else f' of {planned}'} "
                   f"cells gave no readings ({_e(what)}); the verdicts below rest on the measured cells only "
                   "(<a href='#faults'>which, and why</a>).</p>")
    failed = [g for g in summary.get("gates") or [] if g.get("failed")]
    if failed:
        out.append(f"<p class='banner'><b>CI gates: {len(failed)} of {len(summary['gates'])} failed</b> "
                   f"({_e(', '.join(g['gate'] for g in failed))}; <a href='#gates'>details</a>).</p>")
    return "".join(out)


def _names(titles: list[str], limit: int = 3) -> str:
    shown = ", ".join(titles[:limit]) + (f" +{len(titles) - limit}" if len(titles) > limit else "")
    return f"<span title='{_e('; '.join(titles))}'>{_e(shown)}</span>"


def _channel_line(cv: ChannelVerdict) -> str:
    n = cv.readings
    if cv.outcome in ("fell", "mixed", "rose"):
        parts = []
        if cv.fell:
            cls = "fell" if cv.hook is not False else "side"
            parts.append(f"<span class='{cls}'>fell</span> on {len(cv.fell)} of {n} ({_names(cv.fell)})")
        if cv.rose:
            parts.append(f"<span class='rose'>rose</span> on {len(cv.rose)} of {n} ({_names(cv.rose)})")
        moved = "; ".join(parts)
    elif cv.outcome == "not shown":
        moved = "<span class='within'>not shown to move</span>: " + (
            "its interval covers 0" if n == 1 else f"all {n} intervals cover 0")
    else:
        moved = (f"<span class='within'>no interval</span>: {'its reading rests' if n == 1 else f'all {n} readings rest'} "
                 "on one distinct pair of cells")
    if cv.hook is None:
        hook = "not audited"
    elif cv.hook:
        hook = "an active hook reaches it"
    else:
        hook = "<b>no active hook reaches it</b>" + (": a side effect, not protection" if cv.fell else "")
    few = ""
    if cv.pairs is not None and cv.pairs < MIN_PAIRS and cv.outcome != "no interval":
        few = (f" · <span class='side' title='a bootstrap over {cv.pairs} pairs spans at most their range; "
               f"fewer than {MIN_PAIRS} pairs cannot pass an exact sign test at 5%'>over {cv.pairs} paired "
               "cells only</span>")
    return f"<div><b>{_e(cv.channel)}</b>: {moved} · {hook}{few}</div>"


def _reading_text(r: dict[str, Any] | None) -> str:
    """A reading dict (estimate/value, low, high) as "x [low, high]"; "-" where there is none."""
    if not isinstance(r, dict):
        return "-"
    value = next((r[k] for k in ("estimate", "value", "mean", "delta") if r.get(k) is not None), None)
    low, high = r.get("low"), r.get("high")
    if (low is None or high is None) and isinstance(r.get("ci"), (list, tuple)) and len(r["ci"]) == 2:
        low, high = r["ci"]
    return "-" if value is None else _interval(value, [low, high] if low is not None else None)


def _setting(r: dict[str, Any]) -> str:
    if r.get("epsilon_setting"):
        return str(r["epsilon_setting"])
    return "" if r.get("epsilon") is None else f"eps={r['epsilon']:g}"


def _utility_text(rows: list[dict[str, Any]], baseline: list[dict[str, Any]]) -> str:
    """A defense's utility rows, a line each: the headline reading beside the baseline's, and how
    close its answers are to the undefended ones where the row says."""
    base = next((b for b in baseline if b.get("estimate") is not None), None)
    out = []
    for r in rows:
        name = str(r.get("title") or r.get("metric") or r.get("name") or "utility")
        name = name.split(": ", 1)[1] if name.lower().startswith("utility: ") else name  # the column says utility
        setting = _setting(r)
        line = f"{setting + ': ' if setting else ''}{name} {_reading_text(r)}"
        if base is not None and base is not r:
            line += f" ({BASELINE}: {_reading_text(base)})"
        sim = (r.get("similarity") or {}).get("rouge_l") if isinstance(r.get("similarity"), dict) else None
        if sim:
            line += f"; ROUGE-L to {BASELINE}'s answers {_reading_text(sim)}"
        out.append(_e(line))
    return "<br>".join(out) or "not measured"


def verdict_html(summary: dict[str, Any], figures: dict[str, str | None]) -> str:
    """The first screen: a verdict per defense against the baseline, or per target without one."""
    if has_baseline(summary):
        rows = defense_verdicts(summary)
        if rows:
            return _defense_verdicts(summary, rows, figures)
    return _target_verdicts(summary)


def _defense_verdicts(summary: dict[str, Any], rows: list[DefenseVerdict], figures: dict[str, str | None]) -> str:
    with_utility = bool(utility_rows(summary))
    body = []
    for v in rows:
        status = f"<div class='sub'>{_e(v.status)}</div>" if v.status else "<div class='sub'>not audited</div>"
        cells = [f"<td><b>{_e(v.defense)}</b>{status}</td>", "<td>" + "".join(_channel_line(c) for c in v.channels) + "</td>",
                 f"<td class='g-{v.guarantee_state}'>{_e(v.guarantee)}</td>"]
        if with_utility:
            baseline = [u for u in utility_rows(summary) if u.get("defense") == BASELINE]
            cells.append(f"<td>{_utility_text(v.utility, baseline)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    heads = ["defense", f"leakage against {BASELINE}, per channel", "guarantee (claim against the run's lower bounds)"]
    if with_utility:
        heads.append("what it costs in utility")
    table = (f"<div class='wrap'><table class='verdict'><thead><tr>{''.join(f'<th>{_e(h)}</th>' for h in heads)}"
             f"</tr></thead><tbody>{''.join(body)}</tbody></table></div>")
    note = ("<p class='sub'>fell / rose: the 95% interval of the paired change (defense minus "
            f"{BASELINE}, same attack, corpus, epsilon and seed) lies wholly below / above 0 in the leakier "
            "direction; not shown to move: the interval covers 0 (inconclusive, not proof of no effect). "
            "Hook: Table I's verdict for the channel the metric reads (an active hook is what makes a change "
            "protection rather than a side effect). Hover a list for every metric.")
    if not with_utility:
        note += " Utility was not measured in this run."
    return table + note + "</p>" + _fig(figures.get("forest"))


def _reading(r: dict[str, Any]) -> str:
    of = f" {r['of']}" if r.get("of") else ""
    small = " (small sample)" if r.get("small_sample") else ""
    return _e(f"{metric_title(r['metric'])}: {_interval(r['estimate'], [r.get('low'), r.get('high')])}{of}{small}")


def _target_verdicts(summary: dict[str, Any]) -> str:
    rows = target_verdicts(summary)
    if not rows:
        return _warn("no cell of this run gave a reading")
    body = []
    for v in rows:
        if v.leaked is None:
            leaked = "not scored (no leak-listing metric applied)"
        elif v.leaked:
            types = ", ".join(f"{t} {n}" + (f" of {v.leaked_of[t]}" if t in v.leaked_of else "")
                              for t, n in v.leaked_types.items())
            leaked = f"<b class='rose'>{v.leaked} distinct item{'s' if v.leaked > 1 else ''}</b> ({_e(types)}" + (
                "; counts over the items listed" if v.leaked > sum(v.leaked_types.values()) else "") + ")"
        else:
            leaked = "<span class='fell'>none found</span>"
        gates = ("<span class='rose'>FAIL: " + _e(", ".join(v.gates_failed)) + "</span>" if v.gates_failed
                 else "pass" if summary.get("gates") else "none set")
        at = f"<div class='sub'>@ {_e(', '.join(v.endpoints))}</div>" if v.endpoints else ""
        body.append(f"<tr><td><b>{_e(v.target)}</b>{at}<div class='sub'>{v.measured} of {v.cells} cells measured</div></td>"
                    f"<td>{leaked}</td><td>{'<br>'.join(_reading(r) for r in v.headlines) or '-'}</td><td>{gates}</td></tr>")
    audited = {r["defense"] for r in summary.get("table_one") or []} - endpoint_targets(summary)
    heads = ["defense" if audited else "target", "what leaked", "headline readings (95% interval)",
             "CI gates"]
    why = (summary.get("empty_states") or {}).get("table_two")
    note = ("<p class='sub'>No undefended baseline in this run, so no change against one is claimed"
            + (f" (Table II is empty: {_e(why)})" if why else "") + ". Intervals: over cells where a target has "
            "several, else over one cell's own units.</p>")
    return (f"<div class='wrap'><table class='verdict'><thead><tr>{''.join(f'<th>{h}</th>' for h in heads)}</tr>"
            f"</thead><tbody>{''.join(body)}</tbody></table></div>" + note)


def utility_html(summary: dict[str, Any], figures: dict[str, str | None]) -> str:
    """What each defense costs in utility: ``summary["utility"]`` rows and the privacy-utility
    frontier figure (``figures["frontier"]``), where the run measured them; else nothing."""
    rows = utility_rows(summary)
    if not rows and not figures.get("frontier"):
        return ""
    data = summary.get("utility") if isinstance(summary.get("utility"), dict) else {}
    leak = data.get("leakage_title") or "leakage"
    table = _table(
        ["defense", "setting", "utility (95% interval)", "exact match", f"ROUGE-L to {BASELINE}'s answers",
         f"{leak} (same defense and setting)", "questions", "cells"],
        [[_td(r.get("defense", "-")), _td(_setting(r) or "-"),
          _td(f"{r.get('title') or r.get('metric', '')} {_reading_text(r)}"), _td(_reading_text(r.get("exact_match"))),
          _td(_reading_text((r.get("similarity") or {}).get("rouge_l") if isinstance(r.get("similarity"), dict) else None)),
          _td(_reading_text(r.get("leakage"))), _td(r.get("questions", "-")), _td(r.get("cells", "-"))]
         for r in rows]) if rows else ""
    note = ("<p class='sub'>benign questions whose answers are in the corpus, asked of every defense beside the "
            "attacks; intervals: " + _e(rows[0].get("interval_over", "as each row states") if rows else "-")
            + ". The frontier: utility against leakage per defense and epsilon.</p>")
    return _section("utility-cost", "What it costs in utility", note + _fig(figures.get("frontier")) + table)


def _levels_body(summary: dict[str, Any], figures: dict[str, str | None]) -> str:
    empty = summary.get("empty_states") or {}
    levels = without_duplicates(summary.get("levels") or [], ("estimate", "low", "high"))
    level_rows = [[_td(r["defense"]), _td(metric_label(r["metric"])),
                   _td(_num(r["estimate"]) + ("" if r.get("of") is None else f" {r['of']}")),
                   _td("-" if r["low"] is None else "no spread (every reading equal)" if r["low"] == r["high"]
                       else f"[{_num(r['low'])}, {_num(r['high'])}]"),
                   _td(r.get("interval_over", "cells")), _td(f"{r['n_unique']} of {r['n_runs']}"),
                   _td((", ".join(str(n) for n in r.get("n_per_cell", [])) or "-") + (f" {r['n_of']}" if r.get("n_of") else "")),
                   _td(r.get("small_sample") or "-", "no" if r.get("small_sample") else ""),
                   _td(r.get("partial_cells", 0)), _td(r.get("excluded_failed", 0))] for r in levels]
    dedup = summary.get("dedup") or {}
    return (_fig(figures.get("levels"))
            + f"<p class='sub'>{_excluded_text(summary)} Cells that released exactly the same answers to the same "
            f"queries are collapsed before resampling ({dedup.get('level_readings', 0)} readings collapsed).</p>"
            + (_table(["defense", "metric", "mean", "95% interval", "resampled", "distinct cells used",
                       "n per cell", "sample-size warning", "partial cells", "failed cells left out"], level_rows)
               if level_rows else _warn("no leakage reading: " + empty.get("levels", "no metric applied"))))


def _guarantees_body(summary: dict[str, Any], figures: dict[str, str | None]) -> str:
    parts = [_fig(figures.get("eps"))]
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
              for g in summary.get("guarantees") or []]
    # a card holds on its own release boundary; a box above may void the same card for the
    # answers (a retrieval-only mechanism says nothing about generated text), and both are true
    parts.append("<p class='sub'>Each epsilon(T) holds for what its boundary column names and nothing "
                 "past it: a retrieval-only card shows values here for the retrieved ids while a box "
                 "above says it is void for the answers.</p>")
    parts.append(_table(["defense", "grid eps", "unit", "scope", "boundary", "epsilon(T)"], g_rows))
    if summary.get("privacy_checks"):
        parts.append(privacy_checks_html(summary["privacy_checks"]))
    return "".join(parts)


def _faults_body(summary: dict[str, Any]) -> str:
    parts = []
    if summary.get("incomplete"):  # every planned cell with no readings, with its reason (report.cells)
        plan = summary.get("plan") or {}
        parts.append(f"<h3>Incomplete evidence: {len(summary['incomplete'])} of {_e(plan.get('planned', '?'))} planned "
                     "cells gave no readings (every gate fails)</h3>" + _table(
                         ["cell", "status", "reason"], [[_td(c["label"]), _td(c["status"], "no"), _td(c["reason"])]
                                                        for c in summary["incomplete"]]))
    troubled = summary.get("failed", []) + summary.get("partial", [])
    if troubled:
        parts.append("<p class='sub'>failed: too few queries answered to read the cell; left out of every aggregate. "
                     "partial: some queries failed; the readings rest on the answered ones.</p>")
        parts.append(_table(["cell", "status", "reason", "queries", "answered", "refused", "failed"],
                            [[_td(c["label"]), _td(c["status"], "no"), _td(c.get("reason") or "-"),
                              *[_td((c["counts"] or {}).get(k, "-")) for k in ("queries", "answered", "refused", "errors")]]
                             for c in troubled]))
    if summary.get("errors"):
        parts.append("<h3>Crashed cells</h3>" + _table(["cell", "error"], [[_td(e["label"]), _td(e["error"])]
                                                                          for e in summary["errors"]]))
    if summary.get("corrupt_records"):
        parts.append("<h3>Unreadable cell records</h3>" + _table(
            ["record", "why"], [[_td(c.get("path", c) if isinstance(c, dict) else c),
                                 _td(c.get("error", "-") if isinstance(c, dict) else "-")]
                                for c in summary["corrupt_records"]]))
    return "".join(parts)


def render(summary: dict[str, Any], figures: dict[str, str | None], show_leaks: bool = False) -> str:
    """report.html: the verdicts first (per defense, or per target without a baseline), then what
    leaked and the queries that leaked it, then every table collapsed; a section the run has no
    data for is left out, not shown empty."""
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><meta name='viewport' "
             f"content='width=device-width,initial-scale=1'><title>ragleak report</title><style>{_CSS}</style></head><body>",
             _header(summary), _banners(summary), "<!--nav-->"]
    per_defense = has_baseline(summary) and bool(defense_verdicts(summary))
    # an endpoint's own defense is not visible to ragleak: no Table I row, no guarantee card for it
    endpoints = endpoint_targets(summary)
    table_one = [r for r in summary.get("table_one") or [] if r["defense"] not in endpoints]
    guarantees = [g for g in summary.get("guarantees") or [] if g["defense"] not in endpoints]
    # rows are defenses where the run audited any (a grid without `none`), targets where it audited none
    defenses = per_defense or bool(table_one)
    parts.append(_section("verdict", "Verdict per defense" if defenses else "Verdict per target",
                          verdict_html(summary, figures)))
    # what each defense costs in utility (issue 40): rendered from summary["utility"] and the
    # frontier figure where the run measured them, left out where it did not
    parts.append(utility_html(summary, figures))
    # the leak evidence
    if (summary.get("leaks") or summary.get("leak_state") == "not_measured"
            or any(r["metric"] in ITEM_METRICS for r in summary.get("levels") or [])):
        parts.append(_section("leaks", "What leaked", leaks_html(summary, show_leaks)))
        if summary.get("evidence"):
            parts.append(_section("evidence", f"Evidence: the {len(summary['evidence'])} queries that leaked them",
                                  evidence_html(summary, show_leaks), collapsed=True))
    if summary.get("canaries"):
        parts.append(_section("canaries", "Canaries recovered",
                              "<p class='sub'>a canary counts when an answered query released it verbatim; interval: "
                              "Clopper-Pearson over the canaries.</p>" + _metric_warnings(summary, "canary_recovery")
                              + _table(["cell", "recovered", "of", "rate"],
                                       [[_td(r["label"]), _td("-" if r["recovered"] is None else r["recovered"]),
                                         _td(r["total"]),
                                         _td(_interval(r["rate"], r["ci"]) if r["rate"] is not None else r["note"])]
                                        for r in summary["canaries"]])))
    if figures.get("roc"):
        parts.append(_section("membership", "Membership inference: ROC per cell",
                              _fig(figures["roc"]) + _metric_warnings(summary, "mi_auc")))
    if summary.get("gates"):
        parts.append(_section("gates", "CI gates (--fail-if)", _table(
            ["gate", "result", "cells checked", "detail"],
            [[_td(g["gate"]), _td("FAIL" if g["failed"] else "pass", "no" if g["failed"] else "yes"),
              _td(g["checked"]), _td(g["message"])] for g in summary["gates"]])))
    faults = _faults_body(summary)
    if faults:
        parts.append(_section("faults", "Failed and partial cells", faults))
    # the details, collapsed
    if guarantees or summary.get("privacy_checks"):
        parts.append(_section("guarantees", "Privacy guarantees: epsilon(T) and claims against evidence",
                              _guarantees_body({**summary, "guarantees": guarantees}, figures), collapsed=True))
    if table_one:
        parts.append(_section("audit", "Table I: is each defense on the path it claims?",
                              "<p class='sub'>static status from the source (ast); in brackets: calls in this run "
                              "in which the hook changed a channel (the selected top-k, the rendered prompt or the "
                              "answer, against the identity hook on the same input) / calls measured; (own K): "
                              "calls in which its own output changed; ~: own-output counts, from records written "
                              "before the per-channel effect. A hook that changed its own output but no channel "
                              "is inactive.</p>" + table_one_html(table_one),
                              collapsed=True))
    cells_two = without_duplicates(summary.get("table_two") or [], ("delta", "low", "high"))
    if cells_two or (table_one and summary.get("levels")):
        empty = (summary.get("empty_states") or {}).get("table_two", "no deltas")
        parts.append(_section("table-two", "Table II: leakage deltas against the undefended baseline",
                              "<p class='sub'>a reading is interpretable only where an active hook of the defense "
                              f"reaches the channel the metric observes. {_excluded_text(summary)}</p>"
                              + (table_two_html(cells_two) if cells_two else _warn("Table II is empty: " + empty)),
                              collapsed=True))
    if has_baseline(summary):  # the paper's tables compare defenses with `none`
        parts.append(paper_html(summary.get("paper")))
    if summary.get("levels"):
        parts.append(_section("leakage", f"Leakage per {'defense' if defenses else 'target'}: every reading",
                              _levels_body(summary, figures), collapsed=True))
    if summary.get("attribution"):
        parts.append(_section("attribution", "Knowledge asymmetry: sentence attribution", _attribution_body(summary),
                              collapsed=True))
    if summary.get("utility_curves"):
        parts.append(_section("utility", "Private-RAG: utility against query index U(t)", _ut_body(summary, figures),
                              collapsed=True))
    if summary.get("ended_early"):
        parts.append(_section("ended-early", "Cells whose attack ended before its budget",
                              "<p class='sub'>the attack stopped on its own (it had nothing new to send); the readings "
                              "rest on the queries it sent, not on the budget.</p>"
                              + _table(["cell", "queries sent", "budget"],
                                       [[_td(c["label"]), _td(c["counts"]["queries"]), _td(c["counts"]["budget"])]
                                        for c in summary["ended_early"]]), collapsed=True))
    if summary.get("cells_table"):
        parts.append(_section("cells", "All cells", _cells_body(summary), collapsed=True))
    parts.append("<p class='sub'>Reproduce: <code>ragleak report RUN_DIR</code> over the same run directory.</p></body></html>")
    page = "".join(parts)
    return page.replace("<!--nav-->", _nav(page), 1)


def _attribution_body(summary: dict[str, Any]) -> str:
    return ("<p class='sub'>RAG answer vs the attacker's plain LLM, sentence by sentence; ground truth: "
            "the sentence is drawn from the retrieved context. Intervals: bootstrap over queries.</p>"
            + _metric_warnings(summary, "attribution_esr") + _metric_warnings(summary, "attribution_f1")
            + _metric_warnings(summary, "attribution_auc")
            + _table(["cell", "sentences", "private", "ESR", "precision", "F1", "flag-all F1", "AUC"],
                     [[_td(r["label"]), _td(r["sentences"]), _td(r["private"]),
                       _td(_interval(r["esr"], r["esr_ci"])),
                       _td("-" if r.get("precision") is None else _num(r["precision"])),
                       _td(_interval(r["f1"], r["f1_ci"])),
                       _td("-" if r.get("flag_all_f1") is None else _num(r["flag_all_f1"])),
                       _td(_interval(r["auc"], r["auc_ci"]))]
                      for r in summary["attribution"]]))


def _ut_body(summary: dict[str, Any], figures: dict[str, str | None]) -> str:
    rows = [[_td(c["label"]), _td(p["t"]), _td(p["relevant"]), _td(p["charged"]), _td(p["active_docs"]),
             _td("-" if p["quality"] is None else _num(p["quality"]))]
            for c in summary["utility_curves"] for p in c["points"]]
    return ("<p class='sub'>each relevant document is charged per query and retires after M charges; "
            "quality is the ROUGE-L F1 of the private answer against the undefended answer to the same "
            "query.</p>" + _fig(figures.get("utility"))
            + _table(["cell", "t", "relevant", "charged", "active documents", "quality"], rows))


def _cell_metrics(metrics: dict[str, Any]) -> str:
    """A cell's readings as "title value" pairs, a sole part equal to its whole left out (as in the
    tables above: MI AUC with one scorer is not shown twice)."""
    rows = [{"defense": "", "metric": k, "value": v} for k, v in metrics.items()]
    dup = duplicate_parts(rows, ("value",))
    return "; ".join(f"{metric_title(k)} {_num(v) if v is not None else 'undefined'}"
                     for k, v in metrics.items() if k not in dup) or "-"


def _cells_body(summary: dict[str, Any]) -> str:
    rows = [[_td(c["label"]), _td(c["status"]), _td(json.dumps(c["counts"])), _td(_cell_metrics(c.get("metrics") or {})),
             _td(c["model_calls"]), _td(c["cache_hits"]), _td(c.get("cache_waited", 0)), _td(c["seconds"])]
            for c in summary["cells_table"]]
    return _table(["cell", "status", "queries", "metrics", "model calls", "cache hits", "of them waited", "seconds"], rows)


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
