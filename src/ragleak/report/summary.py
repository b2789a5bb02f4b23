"""Aggregate a run directory into the summary every report output is rendered from.

Per-defense readings use the cell as the resampling unit, after collapsing deterministic
duplicates (cells that asked the same queries and got the same release back, by
``CellRecord.release_digest``, e.g. an epsilon that is inert for a non-DP defense), and pair each
defended cell with the baseline cell run under the same conditions (attack, corpus, mode,
epsilon, seed).

Only measured cells enter an aggregate: ``ok`` cells and ``partial`` ones (some queries failed;
their readings rest on the answered rest, and say on how many). ``failed`` cells (too few
answered queries) and ``error`` cells are left out, and every aggregate says how many were.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from pathlib import Path
from typing import Any

from ragleak.accounting.card import CARD_QUERIES
from ragleak.errors import ConfigError
from ragleak.grid.store import MEASURED, CellRecord
from ragleak.metrics import METRICS, metric_channels, metric_info, split_key
from ragleak.report.cells import BASELINE, condition_key, corrupt_records, incomplete_cells, load_run, planned_cells
from ragleak.report.privacy_checks import privacy_checks
from ragleak.report.paper import MI_CORPUS, paper_tables
from ragleak.report.utility import utility_curves, utility_frontier

log = logging.getLogger(__name__)

__all__ = ["BASELINE", "aggregate", "condition_key", "load_run", "summarize"]


def _registered(key: str) -> bool:
    return split_key(key)[0] in METRICS.names()


def fingerprint(r: CellRecord) -> str:
    """What a cell released (``release_digest``); a record without one is its own run."""
    return r.release_digest or r.cell_id


def per_defense_values(records: list[CellRecord]) -> dict[str, dict[str, list[tuple[tuple, float, tuple, int]]]]:
    """{defense: {metric key: [(condition, value, fingerprint, n), ...]}} over measured cells; a
    reading that is undefined in a cell (value None) is left out, never read as zero.

    The fingerprint is the cell's release digest with the value: two cells are copies when they
    released the same thing *and* read the same; the value keeps apart cells whose equal release
    is scored against different ground truth (say, another seed's canaries)."""
    out: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        if r.status not in MEASURED:
            continue
        for key, result in r.metrics.items():
            if _registered(key) and result.value is not None:
                value = float(result.value)
                out[r.spec.defense][key].append((condition_key(r), value, (fingerprint(r), value), result.n))
    return out


def _within_cell_intervals(records: list[CellRecord]) -> dict[tuple[str, str], tuple[list[float], str]]:
    """(defense, metric) -> the interval a cell computed over its own units, and what they were."""
    out = {}
    for r in records:
        if r.status in MEASURED:
            for key, result in r.metrics.items():
                if _registered(key) and result.interval is not None:
                    out[(r.spec.defense, key)] = ([float(v) for v in result.interval], result.interval_over or "")
    return out


def excluded_cells(records: list[CellRecord]) -> dict[str, Any]:
    """The cells no aggregate reads (failed and error), in all and per defense."""
    left_out = [r for r in records if r.status not in MEASURED]
    by_defense: dict[str, dict[str, int]] = defaultdict(lambda: {"failed": 0, "error": 0})
    for r in left_out:
        by_defense[r.spec.defense][r.status] += 1
    return {"failed": sum(r.status == "failed" for r in left_out), "error": sum(r.status == "error" for r in left_out),
            "by_defense": {d: dict(v) for d, v in sorted(by_defense.items())}}


def aggregate(records: list[CellRecord], seed: int = 0) -> dict[str, Any]:
    """Levels and deltas per defense and metric over the measured cells, duplicates collapsed
    before any bootstrap; ``excluded`` counts the failed and error cells left out, ``collapsed``
    the readings dropped as copies of another."""
    from ragleak.metrics.stats import bootstrap_mean, paired_bootstrap_delta

    values = per_defense_values(records)
    within_cell = _within_cell_intervals(records)
    excluded = excluded_cells(records)
    partial = defaultdict(int)
    for r in records:
        partial[r.spec.defense] += r.status == "partial"
    levels, deltas = [], []
    for defense, metrics in sorted(values.items()):
        left_out = excluded["by_defense"].get(defense, {"failed": 0, "error": 0})
        for key, rows in sorted(metrics.items()):
            iv = bootstrap_mean([v for _, v, _, _ in rows], fingerprints=[f for _, _, f, _ in rows], seed=seed)
            level = {"defense": defense, "metric": key, "title": metric_info(key)["title"], **iv.to_dict(),
                     "interval_over": "cells", "collapsed": iv.n_runs - iv.n_unique,
                     "n_per_cell": [n for _, _, _, n in rows], "partial_cells": partial[defense],
                     "excluded_failed": left_out["failed"], "excluded_error": left_out["error"]}
            ci = within_cell.get((defense, key))
            if iv.n_unique < 2:
                # one distinct cell: resampling cells would give a zero-width interval. The cell's own
                # interval over its units (queries, candidates ...) is the honest spread where it has
                # one; else there is none
                if ci is not None:
                    level.update(low=ci[0][0], high=ci[0][1], interval_over=f"{ci[1]} of one cell")
                else:
                    level.update(low=None, high=None, interval_over="none (one distinct cell)")
            levels.append(level)
            if defense == BASELINE or BASELINE not in values or key not in values[BASELINE]:
                continue
            base = {c: (v, f) for c, v, f, _ in values[BASELINE][key]}
            pairs = [(v, base[c][0], (f, base[c][1])) for c, v, f, _ in rows if c in base]
            if not pairs:
                continue
            iv = paired_bootstrap_delta([p[0] for p in pairs], [p[1] for p in pairs],
                                        fingerprints=[p[2] for p in pairs], seed=seed)
            one = iv.n_unique < 2  # a single distinct pair has no spread to resample
            deltas.append({"defense": defense, "metric": key, "delta": iv.estimate, "low": None if one else iv.low,
                           "high": None if one else iv.high, "pairs": len(pairs), "unique_pairs": iv.n_unique,
                           "collapsed": len(pairs) - iv.n_unique, "excluded_failed": left_out["failed"]})
    return {"levels": levels, "deltas": deltas, "excluded": excluded,
            "collapsed": {"level_readings": sum(lv["collapsed"] for lv in levels),
                          "delta_pairs": sum(d["collapsed"] for d in deltas)}}


def audit_tables(records: list[CellRecord], deltas: list[dict]) -> dict[str, Any]:
    """Table I (static inventory + each hook's per-channel effect from the cells' hook summaries)
    and Table II."""
    from ragleak.audit.dashboard import MetricReading, table_one, table_two
    from ragleak.audit.inventory import inventory_class
    from ragleak.audit.trace import activity_of
    from ragleak.defenses import defense_class

    defenses = sorted({r.spec.defense for r in records})
    inventories, activity = [], {}
    for name in defenses:
        try:
            cls = defense_class(name)
        except ConfigError:  # a scored transcript's target (an endpoint, a label): no source to audit
            log.info("%s is not a registered defense: not audited", name)
            continue
        try:
            inventories.extend(_named(inventory_class(cls), name))
        except Exception as exc:  # an unimportable defense is shown as a problem, not a crash
            log.warning("cannot audit defense %s: %s", name, exc)
            continue
        rows: dict[str, list[dict[str, int]]] = defaultdict(list)
        for r in records:
            if r.spec.defense == name:
                for hook, row in r.hook_summary.items():
                    rows[hook].append(row)
        # the per-channel effect where every cell recorded it; older records: their own-output counts
        activity[name] = {hook: activity_of(name, hook, hook_rows) for hook, hook_rows in rows.items()}
    audited = {inv.defense for inv in inventories}
    readings = [MetricReading(defense=d["defense"], metric=d["metric"], delta=d["delta"], low=d["low"], high=d["high"])
                for d in deltas if d["defense"] in audited]
    cells = table_two(readings, inventories, activity, channels_of=metric_channels)
    for cell in cells:  # the direction a defense should move the reading, as the registry declares it
        info = metric_info(cell["metric"])
        cell.update(title=info["title"], unit=info["unit"], higher_is_leakier=info["higher_is_leakier"])
    return {"table_one": table_one(inventories, activity), "table_two": cells}


def _named(inv, name: str):
    return [inv.model_copy(update={"defense": name})] if inv.defense != name else [inv]


def guarantee_curves(records: list[CellRecord]) -> list[dict[str, Any]]:
    from ragleak.accounting.card import describe_adjacency
    from ragleak.accounting.composition import epsilon_after, void_reason
    from ragleak.accounting.guarantee import Guarantee

    seen, out = set(), []
    for r in records:
        if r.status not in MEASURED or not r.guarantee:
            continue
        # the grid's epsilon is shown only where the defense took it (an inert axis would
        # label, say, private-rag's eps_q = 20 guarantee "eps=1")
        epsilon = r.spec.applied_epsilon
        key = (r.spec.defense, epsilon, repr(r.guarantee))
        if key in seen:
            continue
        seen.add(key)
        g = Guarantee.model_validate(r.guarantee)
        points = [epsilon_after(g, t).model_dump(mode="json") for t in CARD_QUERIES] if g.is_formal else []
        setting = None if epsilon is None else f"{r.spec.epsilon_param}={epsilon:g}"
        # the claim on its own boundary, checked against the corpus the cell served: a violated
        # assumption (a truncated pool, ...) voids it here too
        reason = void_reason(g) if g.is_formal else ""
        out.append({"defense": r.spec.defense, "epsilon": epsilon, "epsilon_setting": setting,
                    "guarantee": r.guarantee, "curve": points, "void": bool(reason), "void_reason": reason,
                    "adjacency": describe_adjacency(g),
                    "assumptions": [a.model_dump(mode="json") for a in g.assumptions]})
    return out


def attribution_results(records: list[CellRecord]) -> list[dict[str, Any]]:
    """The knowledge-asymmetry cells: ESR, F1 and AUC with their query-bootstrap intervals."""
    rows = []
    for r in records:
        readings = {k: r.metrics.get(f"attribution_{k}") for k in ("esr", "f1", "auc")}
        if r.status not in MEASURED or not any(readings.values()):
            continue
        details = next(m for m in readings.values() if m is not None).details
        # precision and the flag-everything baseline sit beside ESR: a classifier that flags every
        # sentence reaches ESR 1 and shows up here as no better than the baseline
        row = {"cell_id": r.cell_id, "label": r.spec.label, "defense": r.spec.defense, "status": r.status,
               "sentences": details.get("sentences"), "private": details.get("private"),
               "precision": details.get("precision"), "flag_all_f1": (details.get("flag_all") or {}).get("f1")}
        for name, m in readings.items():
            row[name] = None if m is None else m.value
            row[f"{name}_ci"] = None if m is None or m.interval is None else list(m.interval)
        rows.append(row)
    return rows


def canary_results(records: list[CellRecord]) -> list[dict[str, Any]]:
    """The canary cells: canaries recovered of those planted, with the Clopper-Pearson interval."""
    rows = []
    for r in records:
        m = r.metrics.get("canary_recovery")
        if r.status in MEASURED and m is not None:
            rows.append({"cell_id": r.cell_id, "label": r.spec.label, "defense": r.spec.defense, "status": r.status,
                         "rate": m.value,
                         "ci": None if m.interval is None else list(m.interval),
                         "recovered": m.details.get("recovered"), "total": m.n, "note": m.note})
    return rows


def _cell_row(r: CellRecord, reasons: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """A cell's row; a cell with no readings (failed, error) also carries its ``failure`` and ``reason``."""
    row = {"cell_id": r.cell_id, "label": r.spec.label, "status": r.status,
           "counts": None if r.counts is None else r.counts.model_dump()}
    if reasons is not None and r.cell_id in reasons:
        row.update(failure=reasons[r.cell_id]["failure"], reason=reasons[r.cell_id]["reason"])
    return row


def _readings(r: CellRecord) -> dict[str, Any]:
    """A cells_table row's readings: a cell that measured nothing (failed, error) has none, so no
    reading of it (a 0.0 from the few queries it got) can pass for a measurement."""
    if r.status not in MEASURED:
        return {"metrics": {}, "metric_n": {}}
    return {"metrics": {k: m.value for k, m in r.metrics.items()}, "metric_n": {k: m.n for k, m in r.metrics.items()}}


def summarize(run_dir: Path, seed: int = 0) -> dict[str, Any]:
    records = load_run(run_dir)
    measured = [r for r in records if r.status in MEASURED]
    releases = [fingerprint(r) for r in measured]
    agg = aggregate(records, seed=seed)
    calls = sum(r.usage.model_calls for r in records)
    hits = sum(r.usage.cache_hits for r in records)
    statuses = {s: sum(r.status == s for r in records) for s in ("ok", "partial", "failed", "error")}
    counted = [r.counts for r in records if r.counts is not None]
    audit = audit_tables(records, agg["deltas"])
    incomplete = incomplete_cells(run_dir, records)
    reasons = {c["cell_id"]: c for c in incomplete}
    planned = len(planned_cells(run_dir))
    return {
        "schema_version": 3,
        "run": str(run_dir),
        "cells": len(records),
        "ok": statuses["ok"],
        "status_counts": {**statuses, "missing": sum(c["status"] == "missing" for c in incomplete),
                          "corrupt": sum(c["status"] == "corrupt" for c in incomplete)},
        # the evidence against the plan: every planned cell with no readings, with its reason; any
        # one fails every gate (report.gates)
        "plan": {"planned": planned, "measured": planned - len(incomplete), "incomplete": len(incomplete),
                 "complete": not incomplete},
        "incomplete": incomplete,
        "queries": {"queries": sum(c.queries for c in counted), "answered": sum(c.answered for c in counted),
                    "refused": sum(c.refused for c in counted), "failed": sum(c.errors for c in counted)},
        "partial": [_cell_row(r) for r in records if r.status == "partial"],
        "failed": [_cell_row(r, reasons) for r in records if r.status == "failed"],
        # cells whose attack stopped before its budget (IKEA runs out of new questions): their
        # readings rest on the queries sent, not on the budget the grid names
        "ended_early": [_cell_row(r) for r in records if r.status in MEASURED and r.counts is not None
                        and r.counts.budget is not None and r.counts.queries < r.counts.budget],
        "errors": [{"cell_id": r.cell_id, "label": r.spec.label, "error": r.error,
                    **{k: reasons[r.cell_id][k] for k in ("failure", "reason") if r.cell_id in reasons}}
                   for r in records if r.status == "error"],
        "model_calls": calls,
        "cache_hits": hits,
        "cache_hit_rate": round(hits / (calls + hits), 4) if calls + hits else 0.0,
        "cache_repairs": sum(r.usage.cache_repairs for r in records),
        "cache_waited": sum(r.usage.cache_waited for r in records),
        "cache_takeovers": sum(r.usage.cache_takeovers for r in records),
        "corrupt_records": corrupt_records(run_dir),
        "dedup": {"fingerprint": "release digest (queries, outcomes, answers, retrieved ids; no timings)",
                  "cells_with_identical_release": len(releases) - len(set(releases)),
                  "distinct_releases": len(set(releases)), **agg["collapsed"]},
        "seconds": round(sum(r.timings.get("total_s", 0.0) for r in records), 2),
        **{k: v for k, v in agg.items() if k != "collapsed"},
        **audit,
        "paper": paper_tables(records, agg, aggregate([r for r in records if r.spec.corpus == MI_CORPUS], seed=seed),
                              audit["table_two"]),
        "guarantees": guarantee_curves(records),
        "privacy_checks": privacy_checks(run_dir, records),
        "utility_curves": utility_curves(run_dir, records),
        # the benign-question probe per defense and epsilon beside a leakage reading (None: no probe ran)
        "utility": utility_frontier(run_dir, records, seed=seed),
        "metrics": {key: metric_info(key) for key in sorted({k for r in measured for k in r.metrics if _registered(k)})},
        "attribution": attribution_results(records),
        "canaries": canary_results(records),
        "cells_table": [{**_cell_row(r, reasons), **_readings(r),
                         "model_calls": r.usage.model_calls, "cache_hits": r.usage.cache_hits,
                         "cache_waited": r.usage.cache_waited,
                         "seconds": r.timings.get("total_s")} for r in records],
    }
