"""What the plan's reuse saves on a grid, as JSON: the dry run's model calls and ETA as planned,
against the same estimator's figures for the same grid with each saving taken away.

Plans of one grid (default: the ``paper`` preset), all priced by one ``EtaModel`` (this machine's
stored rates, the stored completion table), so their ratios do not move with the estimator's own
changes since issue 18's first estimate (136 h, by an estimator that priced every prompt at a
formula and every answer at the cap):

* ``planned``: what ``ragleak grid --dry-run`` prints: each distinct generation stream once (its
  twins read the cache), the grid's audit mode (default ``sample``);
* ``audit_all``: the same streams with a reference generation on every query of a defense that
  replaces ``generate``, as every run made before the audit modes: the issue's starting point
  (the generation cache already served a single worker's twins then);
* ``no_cache``: every cell its own stream and audit on every query (no bare question shared
  between cells either), for scale only: no version of the grid runner ran without the cache;
* ``planned_on_workers``: ``planned`` on ``--workers`` workers (default: one per core, as a run),
  the dry run's second ETA: cells handed out as the runner hands them out, at the rates measured
  with that many models running at once. Before issue 18 a second worker added nothing (both
  missed the shared cache together: same wall time as one), so the starting point on this
  machine stays ``audit_all`` on one worker;
* ``audit_all_at_workers_rates``: ``audit_all`` on one worker priced at the several-copy rates,
  so that ``planned_on_workers_over_audit_all_same_rates`` compares at one set of rates (the
  one-copy and several-copy measurements are separate timings, and came out 4% apart the wrong
  way round once).

Not priced (the ETA is generation time only), so not in these ratios: IKEA's history
re-embedding, per-worker index builds and attacker-model loads, which issue 18 also removed.
Batched decoding and prefix reuse are explicit modes, off in the preset, and priced as off.

    PYTHONPATH=src RAGLEAK_THREADS=1 .venv/bin/python benchmarks/plan_savings.py [--preset paper] \\
        [--out benchmarks/results/plan_savings-DATE.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from datetime import date
from pathlib import Path

from ragleak.grid.completions import stored_table
from ragleak.grid.plan import EtaModel, Estimator, distinct_streams, plan_summary
from ragleak.grid.runner import run_workers
from ragleak.grid.spec import preset as load_preset
from ragleak.grid.tokens import PromptTokenCounter
from ragleak.rag.speed import measure_missing


def price(estimates, tokens: PromptTokenCounter, copies: int = 1, shared_cache: bool = True) -> dict:
    eta = EtaModel(stored_table(), tokens, copies, shared_cache)
    expected, upper, basis = eta(estimates)
    return {"streams": len(estimates), "queries": sum(e.queries for e in estimates),
            "model_calls_upper": round(sum(e.model_calls for e in estimates)),
            "model_calls_expected": round(eta.expected_calls), "eta_s": expected, "eta_upper_s": upper,
            "eta_h": None if expected is None else round(expected / 3600, 1),
            "by_attack_h": {a: round(t["expected_s"] / 3600, 1) for a, t in basis.get("by_attack", {}).items()},
            "by_defense_h": {d: round(t["expected_s"] / 3600, 1) for d, t in basis.get("by_defense", {}).items()},
            "rates": basis["rates"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="paper")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / f"plan_savings-{date.today()}.json")
    ap.add_argument("--workers", type=int, default=None, help="workers of the parallel ETA (default: cores)")
    args = ap.parse_args()
    workers = run_workers(args.workers)
    grid = load_preset(args.preset)
    cells = grid.expand()
    skipped = measure_missing({(c.stack.model, c.stack.n_threads or 1) for c in cells}, copies=workers)
    if skipped:
        raise SystemExit(f"no rates for {skipped}: install the model(s) or run `ragleak models --bench`")
    tokens = PromptTokenCounter()

    planned = [Estimator(grid.audit, grid.audit_fraction)(c) for c in cells]
    every_query = [Estimator("all")(c) for c in cells]
    plans = {"planned": price(distinct_streams(planned), tokens),
             "audit_all": price(distinct_streams(every_query), tokens),
             "no_cache": price(every_query, tokens, shared_cache=False)}
    parallel = plan_summary(grid, cells, tokens=tokens, workers=workers)["workers_eta"]
    plans["planned_on_workers"] = {**parallel, "eta_h": round(parallel["eta_s"] / 3600, 1)}
    # the baseline at the workers' rates too: the ratio then does not move with how the one-copy
    # and the several-copy measurements happened to come out against each other
    plans["audit_all_at_workers_rates"] = price(distinct_streams(every_query), tokens, workers)
    report = {
        "machine": {"python": platform.python_version(), "cpu": platform.processor() or platform.machine()},
        "preset": args.preset, "cells": len(cells), "audit": {"mode": grid.audit, "fraction": grid.audit_fraction},
        "plans": plans,
        "planned_over_audit_all": round(plans["planned"]["eta_s"] / plans["audit_all"]["eta_s"], 3),
        "planned_over_no_cache": round(plans["planned"]["eta_s"] / plans["no_cache"]["eta_s"], 3),
        "planned_on_workers_over_audit_all": round(parallel["eta_s"] / plans["audit_all"]["eta_s"], 3),
        "planned_on_workers_over_audit_all_same_rates": round(
            parallel["eta_s"] / plans["audit_all_at_workers_rates"]["eta_s"], 3),
        "target": "the paper grid's dry-run ETA <= 1/3 of the estimate before issue 18 (same machine)",
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    json.dump({k: v for k, v in report.items() if k != "plans"} | {
        "eta_h": {name: p["eta_h"] for name, p in plans.items()}}, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
