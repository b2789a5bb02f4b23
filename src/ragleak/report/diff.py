"""`ragleak diff RUN_A RUN_B`: per-defense metric levels in two runs and what moved (with intervals)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragleak.metrics import metric_info
from ragleak.report.summary import aggregate, load_run


def diff_runs(run_a: Path, run_b: Path) -> list[dict[str, Any]]:
    """One row per (defense, metric) in either run; levels over measured cells only, and each row
    says how many failed cells of that defense each run left out."""
    agg_a, agg_b = aggregate(load_run(run_a)), aggregate(load_run(run_b))
    a = {(r["defense"], r["metric"]): r for r in agg_a["levels"]}
    b = {(r["defense"], r["metric"]): r for r in agg_b["levels"]}
    rows = []
    for key in sorted(set(a) | set(b)):
        ra, rb = a.get(key), b.get(key)
        info = metric_info(key[1])
        row: dict[str, Any] = {"defense": key[0], "metric": key[1], "title": info["title"], "unit": info["unit"],
                               "higher_is_leakier": info["higher_is_leakier"],
                               "a": None if ra is None else [ra["estimate"], ra["low"], ra["high"]],
                               "b": None if rb is None else [rb["estimate"], rb["low"], rb["high"]],
                               "excluded_failed": {
                                   side: agg["excluded"]["by_defense"].get(key[0], {}).get("failed", 0)
                                   for side, agg in (("a", agg_a), ("b", agg_b))}}
        if ra and rb:
            row["delta"] = rb["estimate"] - ra["estimate"]
            # moved = the two 95% intervals do not overlap (conservative); without an interval
            # (one distinct cell) only "nothing moved" can be said, and only when nothing did
            if None in (ra["low"], ra["high"], rb["low"], rb["high"]):
                row["moved"] = False if row["delta"] == 0 else None
            else:
                row["moved"] = rb["low"] > ra["high"] or rb["high"] < ra["low"]
        else:
            row["delta"], row["moved"] = None, None
        rows.append(row)
    return rows
