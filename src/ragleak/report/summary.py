"""Aggregate a run directory into the summary every report output is rendered from.

Per-defense readings use the cell as the resampling unit, after dropping deterministic
duplicates (cells whose transcripts are byte-identical, e.g. an epsilon that is inert for a
non-DP defense), and pair each defended cell with the baseline cell run under the same
conditions (attack, corpus, mode, epsilon, seed).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from pathlib import Path
from typing import Any

from ragleak.errors import RagleakError
from ragleak.grid.metrics import registered_metric
from ragleak.grid.store import CellRecord, RunStore

log = logging.getLogger(__name__)

BASELINE = "none"
CARD_QUERIES = (1, 10, 100, 1000)


def condition_key(r: CellRecord) -> tuple:
    """What a defended cell shares with the baseline cell it is compared with."""
    s = r.spec
    return (s.attack, s.corpus, s.mode, s.epsilon, s.seed, s.budget)


def load_run(run_dir: Path) -> list[CellRecord]:
    store = RunStore(run_dir)
    if not (Path(run_dir) / "plan.json").exists():
        raise RagleakError(f"{run_dir} is not a ragleak run directory (no plan.json); run `ragleak grid --out DIR` first")
    return store.records()


def per_defense_values(records: list[CellRecord]) -> dict[str, dict[str, list[tuple[tuple, float, str]]]]:
    """{defense: {metric key: [(condition, value, transcript digest), ...]}} over ok cells."""
    out: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        if r.status != "ok":
            continue
        for key, value in r.metrics.items():
            if registered_metric(key) and isinstance(value, (int, float)):
                out[r.spec.defense][key].append((condition_key(r), float(value), r.transcript_digest or r.cell_id))
    return out


def _within_cell_intervals(records: list[CellRecord]) -> dict[tuple[str, str], list[float]]:
    """(defense, metric) -> the interval a cell computed over its own queries (``<key>_ci``)."""
    out = {}
    for r in records:
        if r.status == "ok":
            for key, value in r.metrics.items():
                base = key[:-3] if key.endswith("_ci") else None
                if base and registered_metric(base) and isinstance(value, list) and len(value) == 2 \
                        and all(isinstance(v, (int, float)) and v == v for v in value):
                    out[(r.spec.defense, base)] = [float(v) for v in value]
    return out


def aggregate(records: list[CellRecord], seed: int = 0) -> dict[str, Any]:
    from ragleak.metrics.stats import bootstrap_mean, paired_bootstrap_delta

    values = per_defense_values(records)
    within_cell = _within_cell_intervals(records)
    levels, deltas = [], []
    for defense, metrics in sorted(values.items()):
        for key, rows in sorted(metrics.items()):
            iv = bootstrap_mean([v for _, v, _ in rows], fingerprints=[d for _, _, d in rows], seed=seed)
            level = {"defense": defense, "metric": key, **iv.to_dict(), "interval_over": "cells"}
            ci = within_cell.get((defense, key))
            if iv.n_unique < 2:
                # one distinct cell: resampling cells would give a zero-width interval. The cell's own
                # bootstrap over its queries is the honest spread where it has one; else there is none
                if ci is not None:
                    level.update(low=ci[0], high=ci[1], interval_over="queries of one cell")
                else:
                    level.update(low=None, high=None, interval_over="none (one distinct cell)")
            levels.append(level)
            if defense == BASELINE or BASELINE not in values or key not in values[BASELINE]:
                continue
            base = {c: (v, d) for c, v, d in values[BASELINE][key]}
            pairs = [(v, base[c][0], (d, base[c][1])) for c, v, d in rows if c in base]
            if not pairs:
                continue
            iv = paired_bootstrap_delta([p[0] for p in pairs], [p[1] for p in pairs],
                                        fingerprints=[p[2] for p in pairs], seed=seed)
            one = iv.n_unique < 2  # a single distinct pair has no spread to resample
            deltas.append({"defense": defense, "metric": key, "delta": iv.estimate, "low": None if one else iv.low,
                           "high": None if one else iv.high, "pairs": len(pairs), "unique_pairs": iv.n_unique})
    return {"levels": levels, "deltas": deltas}


def audit_tables(records: list[CellRecord], deltas: list[dict]) -> dict[str, Any]:
    """Table I (static inventory + dynamic activity from the cells' hook summaries) and Table II."""
    from ragleak.audit.dashboard import MetricReading, table_one, table_two
    from ragleak.audit.inventory import inventory_class
    from ragleak.audit.trace import HookActivity
    from ragleak.defenses import DEFENSES

    defenses = sorted({r.spec.defense for r in records})
    inventories, activity = [], {}
    for name in defenses:
        try:
            inventories.extend(_named(inventory_class(DEFENSES.get(name)), name))
        except Exception as exc:  # an unimportable defense is shown as a problem, not a crash
            log.warning("cannot audit defense %s: %s", name, exc)
            continue
        totals: dict[str, dict[str, int]] = defaultdict(lambda: {"changed": 0, "calls": 0})
        for r in records:
            if r.spec.defense == name:
                for hook, row in r.hook_summary.items():
                    totals[hook]["changed"] += row["changed"]
                    totals[hook]["calls"] += row["calls"]
        activity[name] = {hook: HookActivity(defense=name, hook=hook, **row) for hook, row in totals.items()}
    audited = {inv.defense for inv in inventories}
    readings = [MetricReading(defense=d["defense"], metric=d["metric"], delta=d["delta"], low=d["low"], high=d["high"])
                for d in deltas if d["defense"] in audited]
    return {
        "table_one": table_one(inventories, activity),
        "table_two": table_two(readings, inventories, activity, channels_of=lambda key: _channels(key)),
    }


def _named(inv, name: str):
    return [inv.model_copy(update={"defense": name})] if inv.defense != name else [inv]


def _channels(metric_key: str):
    from ragleak.metrics import metric_channels

    return metric_channels(registered_metric(metric_key))


def guarantee_curves(records: list[CellRecord]) -> list[dict[str, Any]]:
    from ragleak.accounting.composition import epsilon_after
    from ragleak.accounting.guarantee import Guarantee

    seen, out = set(), []
    for r in records:
        if r.status != "ok" or not r.guarantee:
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
        out.append({"defense": r.spec.defense, "epsilon": epsilon, "epsilon_setting": setting,
                    "guarantee": r.guarantee, "curve": points})
    return out


def attribution_results(records: list[CellRecord]) -> list[dict[str, Any]]:
    """The knowledge-asymmetry cells: ESR, F1 and AUC with their query-bootstrap intervals."""
    rows = []
    for r in records:
        m = r.metrics
        if r.status != "ok" or "attribution_sentences" not in m:
            continue
        row = {"cell_id": r.cell_id, "label": r.spec.label, "defense": r.spec.defense,
               "sentences": m["attribution_sentences"], "private": m["attribution_private"]}
        for name in ("esr", "f1", "auc"):
            row[name] = m.get(f"attribution_{name}")
            row[f"{name}_ci"] = m.get(f"attribution_{name}_ci")
        rows.append(row)
    return rows


def summarize(run_dir: Path, seed: int = 0) -> dict[str, Any]:
    from ragleak.report.utility import utility_curves

    records = load_run(run_dir)
    ok = [r for r in records if r.status == "ok"]
    digests = [r.transcript_digest for r in ok]
    agg = aggregate(records, seed=seed)
    calls = sum(r.model_calls for r in records)
    hits = sum(r.cache_hits for r in records)
    return {
        "schema_version": 1,
        "run": str(run_dir),
        "cells": len(records),
        "ok": len(ok),
        "errors": [{"cell_id": r.cell_id, "label": r.spec.label, "error": r.error} for r in records if r.status == "error"],
        "model_calls": calls,
        "cache_hits": hits,
        "cache_hit_rate": round(hits / (calls + hits), 4) if calls + hits else 0.0,
        "dedup": {"cells_with_identical_transcripts": len(digests) - len(set(digests)),
                  "distinct_transcripts": len(set(digests))},
        "seconds": round(sum(r.timings.get("total_s", 0.0) for r in records), 2),
        **agg,
        **audit_tables(records, agg["deltas"]),
        "guarantees": guarantee_curves(records),
        "utility_curves": utility_curves(run_dir, records),
        "attribution": attribution_results(records),
        "cells_table": [{"cell_id": r.cell_id, "label": r.spec.label, "status": r.status,
                         "metrics": {k: v for k, v in r.metrics.items() if not isinstance(v, list)},
                         "model_calls": r.model_calls, "cache_hits": r.cache_hits,
                         "seconds": r.timings.get("total_s")} for r in records],
    }
