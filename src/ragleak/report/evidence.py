"""What the report shows besides the numbers: the leaked items with their documents and the
queries that leaked them, sample-size warnings, guarantee-card warnings, and why an empty table
is empty.

``enrich(summary, records, run_dir)`` adds to the summary (every key optional for a reader):

* ``leaks``: per defense, every leaked item of the metrics that list them in their details
  (``pii_leaks``: corpus PII values; ``canary_recovery``: canaries): metric, type, ``redacted``
  value, documents, cells, queries, ``total`` (items of the defense) and the first (cell, query)
  that released it; ``value`` holds the raw value only with ``--show-leaks``;
* ``leak_headline``: per defense and per (metric, type), the union of the distinct values leaked
  over all its measured cells (``distinct``), out of the distinct values the corpora it read hold
  (``of``, summed over distinct corpus contents; None where the metric gives no total), and the
  measured cells read (``cells``); an auditor's "what leaked", not a mean over cells;
* ``leak_state``: ``leaked`` | ``none_found`` (measured cells, nothing leaked) | ``not_measured``
  (no measured cell: every cell failed, crashed or is missing; nothing can be said);
* ``canary_list``: per defense, every planted canary: ``redacted`` (``value`` only with
  ``--show-leaks``), ``type`` (email or name, by the canary's own form), ``recovered`` (in any
  measured cell), the cells it was planted in and recovered in, and the first query that
  released it (``first``: cell, query index, query text, anchor); ``canary_totals``: per defense
  recovered / planted;
* ``evidence``: the first query of each leaked item (query text; the answer around the leak in
  ``snippet_redacted``, and raw in ``snippet`` only with ``--show-leaks``), each with an
  ``anchor`` the report links to;
* ``sample_warnings``: readings resting on fewer units than ``MIN_SAMPLE`` (an MI AUC from 6
  candidates, an interval from 2 queries), per cell and metric; each level row gains ``n_of``,
  ``n_min`` and ``small_sample``;
* ``guarantee_warnings``: per guarantee row, the card's VOID and assumption warnings (the fields
  a card has: ``void``, ``void_reason``, ``warnings``, ``assumptions``; any may be absent);
* ``empty_states``: why Table II (or the leakage table) has no rows.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from pathlib import Path
from typing import Any

from ragleak.grid.store import MEASURED, CellRecord
from ragleak.metrics.pii import redact
from ragleak.nlp.recognizers import EMAIL_JUDGE_COMPLETE
from ragleak.report.cells import BASELINE

log = logging.getLogger(__name__)

#: Metrics whose details list leaked items (``details["items"]``) the report shows.
ITEM_METRICS = ("pii_leaks", "canary_recovery")
#: Below these many units a reading is shown with a sample-size warning, keyed by ``n_of``.
MIN_SAMPLE = {"answered queries": 10, "candidates": 20, "canaries": 10, "sentences": 20}
SNIPPET = 80  # characters of answer shown each side of a leaked value


def anchor(cell_id: str, index: int) -> str:
    return f"q-{cell_id[:12]}-{index}"


def leaked_items(records: list[CellRecord], top: int | None = None) -> dict[str, list[dict[str, Any]]]:
    """{defense: items} (every one, or the first ``top``), an item merged over the defense's
    measured cells: the cells and queries that released it and the documents that hold it; most
    widely leaked first."""
    merged: dict[str, dict[tuple, dict[str, Any]]] = defaultdict(dict)
    for r in records:
        if r.status not in MEASURED:
            continue
        for metric in ITEM_METRICS:
            reading = r.metrics.get(metric)
            for item in (reading.details.get("items") or []) if reading is not None else []:
                key = (metric, item["type"], item["value"])
                row = merged[r.spec.defense].setdefault(key, {
                    "metric": metric, "type": item["type"], "value": item["value"], "redacted": item["redacted"],
                    "documents": set(), "cells": [], "queries": 0, "first": None})
                row["documents"].update(item.get("documents") or [])
                row["cells"].append(r.spec.label)
                row["queries"] += len(item.get("queries") or [])
                if row["first"] is None and item.get("queries"):
                    row["first"] = {"cell_id": r.cell_id, "label": r.spec.label, "query": item["queries"][0],
                                    "anchor": anchor(r.cell_id, item["queries"][0])}
    out = {}
    for defense, rows in sorted(merged.items()):
        ranked = sorted(rows.values(), key=lambda x: (-len(x["cells"]), -x["queries"], x["type"], x["value"]))
        out[defense] = [{**x, "documents": sorted(x["documents"]), "total": len(rows)} for x in ranked[:top]]
    return out


def leak_headline(records: list[CellRecord], leaks: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Per defense and (metric, type): the distinct values leaked over all its measured cells, out
    of the distinct values its corpora hold (``pii_leaks``: ``corpus_values`` per type, summed
    over distinct corpus contents; ``canary_recovery``: the distinct canaries planted)."""
    cells: dict[str, set[str]] = defaultdict(set)
    of: dict[tuple[str, str, str], dict[Any, int]] = defaultdict(dict)
    for r in records:
        if r.status not in MEASURED:
            continue
        for metric in ITEM_METRICS:
            reading = r.metrics.get(metric)
            if reading is None:
                continue
            cells[r.spec.defense].add(r.cell_id)
            if metric == "pii_leaks":
                for kind, n in (reading.details.get("corpus_values") or {}).items():
                    if n:
                        of[(r.spec.defense, metric, kind)][(r.spec.corpus, r.spec.corpus_digest)] = int(n)
    distinct: dict[tuple[str, str, str], int] = defaultdict(int)
    for defense, items in leaks.items():
        for it in items:
            distinct[(defense, it["metric"], it["type"])] += 1
    out = []
    for key in sorted(set(distinct) | set(of)):
        defense, metric, kind = key
        total = sum(of[key].values()) if key in of else None
        n = distinct.get(key, 0)
        out.append({"defense": defense, "metric": metric, "type": kind, "distinct": n, "of": total,
                    "cells": len(cells[defense]),
                    "text": f"{n}{'' if total is None else f' of {total}'} distinct {kind} values leaked over "
                            f"{len(cells[defense])} measured cells"})
    return out


def canary_type(secret: str) -> str:
    """A canary's type by its own form (a planted set may mix e-mail addresses and names): an
    e-mail where the judges' recognizer finds the whole canary to be one address."""
    found = EMAIL_JUDGE_COMPLETE.find(secret.strip())
    return "email" if any(f.start == 0 and f.end == len(secret.strip()) for f in found) else "name"


def canary_list(records: list[CellRecord], run_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """Per defense, every canary planted in its measured canary cells (from each cell's transcript:
    ``scoring["secrets"]``, canary -> indices of the answers holding it), recovered or not, with
    the first query that released it."""
    merged: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for r in records:
        if r.status not in MEASURED or "canary_recovery" not in r.metrics:
            continue
        transcript = _transcript(run_dir, r.cell_id)
        if transcript is None:
            continue
        answered = {q["index"]: q for q in transcript.get("queries", []) if not q.get("error")}
        for secret, where in sorted((transcript.get("scoring", {}).get("secrets") or {}).items()):
            row = merged[r.spec.defense].setdefault(secret, {
                "value": secret, "redacted": redact(secret), "type": canary_type(secret), "recovered": False,
                "planted_in": [], "recovered_in": [], "first": None})
            row["planted_in"].append(r.spec.label)
            hits = sorted(i for i in where if i in answered)
            if hits:
                row["recovered"] = True
                row["recovered_in"].append(r.spec.label)
                if row["first"] is None:
                    row["first"] = {"cell_id": r.cell_id, "label": r.spec.label, "query": hits[0],
                                    "query_text": answered[hits[0]].get("query", ""),
                                    "anchor": anchor(r.cell_id, hits[0])}
    return {d: sorted(rows.values(), key=lambda x: (not x["recovered"], x["type"], x["redacted"]))
            for d, rows in sorted(merged.items())}


def _transcript(run_dir: Path, cell_id: str) -> dict[str, Any] | None:
    path = Path(run_dir) / "transcripts" / f"{cell_id}.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        log.warning("no transcript for cell %s (%s): its canaries are not listed", cell_id, exc)
        return None


def leak_state(records: list[CellRecord], leaks: dict[str, list[dict[str, Any]]]) -> str:
    """``not_measured`` where no cell measured anything (so nothing can be said about leakage),
    else ``leaked`` or ``none_found``."""
    if not any(r.status in MEASURED for r in records):
        return "not_measured"
    return "leaked" if any(leaks.values()) else "none_found"


def secrets_of(records: list[CellRecord], run_dir: Path) -> set[str]:
    """Every raw value a report could show: the leaked items of every cell and every planted canary."""
    out: set[str] = set()
    for r in records:
        for metric in ITEM_METRICS:
            reading = r.metrics.get(metric)
            for item in (reading.details.get("items") or []) if reading is not None else []:
                out.add(str(item["value"]))
        if "canary_recovery" in r.metrics:
            transcript = _transcript(run_dir, r.cell_id) or {}
            out.update(str(s) for s in (transcript.get("scoring", {}).get("secrets") or {}))
    return {v for v in out if v}


def redact_tree(data: Any, values: set[str]) -> Any:
    """``data`` (JSON-shaped) with every occurrence of every value in ``values`` masked
    (``metrics.pii.redact``), in any string, and with ``value``/``snippet`` keys holding raw text
    dropped: what a report writes without ``--show-leaks``."""
    ordered = sorted(values, key=len, reverse=True)

    def walk(node: Any) -> Any:
        if isinstance(node, str):
            for v in ordered:
                if v in node:
                    node = node.replace(v, redact(v))
            return node
        if isinstance(node, dict):
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, (list, tuple)):
            return [walk(v) for v in node]
        return node

    return walk(data)


def _snippet(answer: str, values: list[str], redacted: bool) -> str:
    """The answer around its first leaked value (``SNIPPET`` characters each side); with
    ``redacted`` every leaked value found in it is masked. Empty when redacting and no value
    occurs literally (it leaked in another format): nothing is shown rather than the raw text."""
    from ragleak.metrics.pii import redact

    lower = answer.lower()
    spots = [(lower.find(v.lower()), v) for v in values if v and lower.find(v.lower()) >= 0]
    if not spots:
        return "" if redacted else answer[: 2 * SNIPPET]
    start = max(0, min(s for s, _ in spots) - SNIPPET)
    end = min(len(answer), max(s + len(v) for s, v in spots) + SNIPPET)
    text = answer[start:end]
    if redacted:
        for _, v in sorted(spots, key=lambda sv: -len(sv[1])):
            low = text.lower()
            i = low.find(v.lower())
            while i >= 0:
                text = text[:i] + redact(text[i:i + len(v)]) + text[i + len(v):]
                i = text.lower().find(v.lower(), i + len(v))
    return ("…" if start else "") + text + ("…" if end < len(answer) else "")


def evidence(run_dir: Path, leaks: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The queries the leak table links to: text and answer snippets (redacted and raw)."""
    wanted: dict[tuple[str, int], list[str]] = defaultdict(list)
    labels = {}
    for items in leaks.values():
        for item in items:
            if item["first"]:
                key = (item["first"]["cell_id"], item["first"]["query"])
                wanted[key].append(item["value"])
                labels[key] = item["first"]["label"]
    out = []
    transcripts: dict[str, dict[int, dict]] = {}
    for (cell_id, index), values in sorted(wanted.items()):
        if cell_id not in transcripts:
            path = Path(run_dir) / "transcripts" / f"{cell_id}.json"
            try:
                transcripts[cell_id] = {q["index"]: q for q in json.loads(path.read_text(encoding="utf-8"))["queries"]}
            except (OSError, ValueError, KeyError) as exc:
                log.warning("no transcript for cell %s (%s): its evidence is not shown", cell_id, exc)
                transcripts[cell_id] = {}
        q = transcripts[cell_id].get(index)
        if q is None:
            continue
        answer = q.get("answer") or ""
        out.append({"anchor": anchor(cell_id, index), "cell_id": cell_id, "label": labels[(cell_id, index)],
                    "query_index": index, "query": q.get("query", ""), "transcript": f"transcripts/{cell_id}.json",
                    "snippet_redacted": _snippet(answer, values, True), "snippet": _snippet(answer, values, False)})
    return out


def sample_warnings(records: list[CellRecord]) -> list[dict[str, Any]]:
    """Readings of measured cells resting on fewer units than ``MIN_SAMPLE`` says they need."""
    out = []
    for r in records:
        if r.status not in MEASURED:
            continue
        for key, m in sorted(r.metrics.items()):
            need = MIN_SAMPLE.get(m.n_of)
            if need is not None and m.value is not None and m.n < need:
                out.append({"cell_id": r.cell_id, "label": r.spec.label, "defense": r.spec.defense, "metric": key,
                            "n": m.n, "n_of": m.n_of, "min": need,
                            "message": f"rests on {m.n} {m.n_of} (fewer than {need}): read it as an anecdote, "
                                       "not a finding"})
    return out


def annotate_levels(levels: list[dict[str, Any]], records: list[CellRecord]) -> None:
    """Give each level row what its n counts, the smallest n of its cells and a warning below
    the minimum sample."""
    n_of: dict[tuple[str, str], str] = {}
    totals: dict[tuple[str, str], set] = defaultdict(set)
    for r in records:
        if r.status in MEASURED:
            for key, m in r.metrics.items():
                n_of.setdefault((r.spec.defense, key), m.n_of)
                # a count out of N ("3 of 40" corpus e-mails), or a rate over N units ("of 10 canaries")
                if isinstance(m.details.get("of"), int):
                    totals[(r.spec.defense, key)].add(f"of {m.details['of']}")
                elif isinstance(m.details.get("total"), int):
                    totals[(r.spec.defense, key)].add(f"(of {m.details['total']} {m.n_of})")
    for level in levels:
        what = n_of.get((level["defense"], level["metric"]), "")
        ns = level.get("n_per_cell") or []
        level["n_of"] = what
        # what a count or rate is out of (corpus values of the type, canaries planted), where every cell agrees
        of = totals.get((level["defense"], level["metric"]), set())
        level["of"] = next(iter(of)) if len(of) == 1 else None
        level["n_min"] = min(ns) if ns else None
        need = MIN_SAMPLE.get(what)
        level["small_sample"] = (f"n = {min(ns)} {what} < {need}" if need is not None and ns and min(ns) < need
                                 else None)


def guarantee_warnings(guarantees: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per guarantee row, the VOID and assumption warnings of its card: the card's own fields where
    the summary has one (``card``), else the card built from the guarantee here."""
    from pydantic import ValidationError

    from ragleak.accounting.card import build_card
    from ragleak.accounting.guarantee import Guarantee

    out = []
    for g in guarantees:
        if not g.get("curve"):
            continue  # no formal guarantee, no curve: the guarantees table says so already
        card = g.get("card")
        if not isinstance(card, dict):
            try:
                card = build_card(g["defense"], Guarantee.model_validate(g["guarantee"])).model_dump(mode="json")
            except (ValidationError, KeyError, ValueError) as exc:
                log.warning("no guarantee card for %s: %s", g.get("defense"), exc)
                continue
        lines = list(card.get("warnings") or [])
        reason = card.get("void_reason")
        if card.get("void") and reason and not any(reason in w for w in lines):
            lines.insert(0, f"VOID: {reason}")
        lines += [_assumption_line(a) for a in (card.get("assumptions") or [])
                  if not (isinstance(a, dict) and any(f"'{a.get('name')}'" in w for w in lines))]
        adjacency = card.get("adjacency")
        if adjacency:
            lines.append(f"adjacency: {adjacency}")
        out.append({"defense": g["defense"], "epsilon_setting": g.get("epsilon_setting"),
                    "void": bool(card.get("void")), "warnings": lines})
    return out


def _assumption_line(assumption: dict[str, Any] | str) -> str:
    """One premise of the card's proof in words, with what this configuration's check found (a
    card's assumptions are ``Assumption`` records; older summaries hold plain strings)."""
    if not isinstance(assumption, dict):
        return f"assumption: {assumption}"
    met = assumption.get("met")
    state = "met" if met is True else "VIOLATED" if met is False else "not checked"
    detail = f"; checked: {assumption['detail']}" if assumption.get("detail") else ""
    return f"assumption '{assumption.get('name', '?')}' {state}: {assumption.get('statement', '')}{detail}"


def empty_states(summary: dict[str, Any], records: list[CellRecord]) -> dict[str, str]:
    """Why a table that has no rows is empty, in words the reader can act on."""
    out = {}
    defenses = {r.spec.defense for r in records if r.status in MEASURED}
    if not summary.get("table_two"):
        if not defenses:
            out["table_two"] = "no measured cell: every cell failed or crashed (see the faults below)"
        elif BASELINE not in defenses:
            out["table_two"] = (f"no baseline: the run has no measured cells of the undefended `{BASELINE}` target, so "
                                f"no delta can be computed; add `{BASELINE}` to the grid's defenses (or score a "
                                f"transcript of the undefended service with `ragleak score T --label {BASELINE}`) "
                                "to fill Table II")
        elif defenses == {BASELINE}:
            out["table_two"] = "only the baseline ran: there is no defense to compare with it"
        else:
            out["table_two"] = ("no defended cell shares its conditions (attack, corpus, mode, epsilon, seed, "
                                "budget) with a measured baseline cell, or no audited defense has a reading")
    if summary.get("leak_state") == "not_measured":
        out["leaks"] = ("nothing was measured: no cell gave readings (every cell failed, crashed or has no record; "
                        "see the incomplete cells), so this run says nothing about what leaks")
    elif summary.get("leak_state") == "none_found":
        out["leaks"] = ("no leaked PII value or canary was found in the answered queries of the measured cells (the "
                        "PII metric needs the corpus the target indexed; canaries need a canary attack or a manifest)")
    if not summary.get("levels"):
        out["levels"] = ("no metric reading: no measured cell, or no metric applied (PII and extraction metrics "
                         "need the corpus)")
    return out


def enrich(summary: dict[str, Any], records: list[CellRecord], run_dir: Path,
           show_leaks: bool = False) -> dict[str, Any]:
    """Add the evidence keys (module doc) to ``summary``; without ``show_leaks`` every raw leaked
    value and planted canary is masked throughout the summary and the raw-only keys (an item's
    ``value``, an evidence row's ``snippet``) are dropped."""
    leaks = leaked_items(records)
    annotate_levels(summary.get("levels", []), records)
    canaries = canary_list(records, run_dir)
    totals = {d: {"recovered": sum(c["recovered"] for c in rows), "planted": len(rows)} for d, rows in canaries.items()}
    headline = leak_headline(records, leaks)
    listed = {row["defense"] for row in headline if row["metric"] == "canary_recovery"}
    cells = {row["defense"]: row["cells"] for row in headline}
    for defense in sorted(set(totals) - listed):  # canaries planted, none recovered: a row saying 0 of N
        n = cells.get(defense, len({r.cell_id for r in records if r.spec.defense == defense and r.status in MEASURED
                                     and "canary_recovery" in r.metrics}))
        headline.append({"defense": defense, "metric": "canary_recovery", "type": "CANARY", "distinct": 0,
                         "of": None, "cells": n, "text": ""})
    headline.sort(key=lambda row: (row["defense"], row["metric"], row["type"]))
    for row in headline:  # a canary headline is out of the distinct canaries planted in the defense's cells
        if row["metric"] == "canary_recovery" and row["defense"] in totals:
            row["of"] = totals[row["defense"]]["planted"]
            row["text"] = (f"{row['distinct']} of {row['of']} distinct canaries recovered over {row['cells']} "
                           "measured cells")
    summary.update(leaks=leaks, leak_headline=headline, leak_state=leak_state(records, leaks),
                   canary_list=canaries, canary_totals=totals,
                   evidence=evidence(run_dir, leaks), sample_warnings=sample_warnings(records),
                   guarantee_warnings=guarantee_warnings(summary.get("guarantees", [])))
    summary["empty_states"] = empty_states(summary, records)
    if not show_leaks:
        for rows in [*summary["leaks"].values(), *summary["canary_list"].values()]:
            for row in rows:
                row.pop("value", None)
        for row in summary["evidence"]:
            row.pop("snippet", None)
        summary.update(redact_tree(summary, secrets_of(records, run_dir)))
    summary["redacted"] = not show_leaks
    return summary
