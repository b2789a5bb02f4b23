"""Grid throughput, as JSON on stdout: cells/hour, model calls per cell, cache hit rate, harness
overhead as a fraction of generation time, and local vs Ray with the same number of workers.

    .venv/bin/python benchmarks/bench_grid.py [--workers 2] [--seeds 4] [--budget 2] [--skip-ray]

Each executor runs the same small grid into a fresh run directory with a fresh generation cache,
then the grid is run a second time over the finished directory (resume: nothing to do) and a
third time into a new directory sharing the first cache (every generation is a hit).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

from ragleak.grid.runner import run_grid
from ragleak.grid.spec import grid_from_dict
from ragleak.grid.store import RunStore


def grid(seeds: int, budget: int):
    return grid_from_dict({
        "name": "bench", "attacks": ["ps"], "defenses": ["none", "pad-regex"], "corpora": ["synthetic-corp"],
        "seeds": list(range(seeds)), "budget": budget, "corpus_params": {"synthetic-corp": {"n_docs": 20}},
        "stack": {"decoding": {"max_tokens": 64}},
    })


def measure(executor: str, workers: int, seeds: int, budget: int) -> dict:
    config = grid(seeds, budget)
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        t0 = time.perf_counter()
        state = run_grid(config, run, executor=executor, workers=workers)
        wall = time.perf_counter() - t0
        records = RunStore(run).records()
        generation = sum(r.timings.get("generation_s", 0.0) for r in records)
        cell_total = sum(r.timings.get("total_s", 0.0) for r in records)
        t0 = time.perf_counter()
        run_grid(config, run, executor=executor, workers=workers)
        resume_noop = time.perf_counter() - t0
        warm = Path(tmp) / "warm"
        warm.mkdir()
        # the SQLite backup API copies committed pages still in the WAL file too (a file copy would not)
        with sqlite3.connect(run / "generations.sqlite") as src, sqlite3.connect(warm / "generations.sqlite") as dst:
            src.backup(dst)
        t0 = time.perf_counter()
        warm_state = run_grid(config, warm, executor=executor, workers=workers)
        warm_wall = time.perf_counter() - t0
    calls = state.model_calls + state.cache_hits
    return {
        "executor": executor, "workers": workers, "cells": state.total, "errors": state.errors,
        "wall_s": round(wall, 2), "cells_per_hour": round(3600 * state.total / wall, 1),
        "model_calls_per_cell": round(state.model_calls / state.total, 3),
        "cache_hit_rate": round(state.cache_hits / calls, 4) if calls else 0.0,
        "harness_overhead_fraction": round((cell_total - generation) / generation, 4) if generation else None,
        "coordinator_overhead_s": round(wall - cell_total / workers, 2),
        "resume_noop_s": round(resume_noop, 3),
        "warm_cache": {"wall_s": round(warm_wall, 2), "model_calls": warm_state.model_calls,
                       "cache_hits": warm_state.cache_hits},
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--budget", type=int, default=2)
    ap.add_argument("--skip-ray", action="store_true")
    args = ap.parse_args()
    rows = [measure("local", args.workers, args.seeds, args.budget)]
    if not args.skip_ray:
        rows.append(measure("ray", args.workers, args.seeds, args.budget))
    json.dump({"args": vars(args), "results": rows}, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
