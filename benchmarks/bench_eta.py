"""The ETA check, as JSON: a real grid of mixed attacks x defenses on one worker (one model thread),
its dry-run ETA (``grid.eta``) taken before it, the wall time it really took, and the live ETA
(``runner.Progress.eta_s``) read once 10% of its cells finished against the time the rest took.

    PYTHONPATH=src RAGLEAK_THREADS=1 .venv/bin/python benchmarks/bench_eta.py \\
        [--scale 1] [--out benchmarks/results/bench_eta-DATE.json] [--keep RUN_DIR]

The model's rates are measured first, in this process and the same conditions as the run
(``rag.speed.measure_speed``, stored where the dry run reads them). The run uses a fresh folder
and a fresh generation cache. Acceptance (issue 36): measured / expected within 0.6-1.6, and the
live ETA after 10% of the cells within 1.5x of the remaining time actually taken. ``--scale N``
multiplies every budget and MI's candidates by N (a longer run where the machine is idle).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import tempfile
import time
from datetime import date, datetime, timezone
from pathlib import Path

from ragleak.grid.eta import Rates, cell_seconds, grid_eta
from ragleak.grid.runner import Progress, run_grid
from ragleak.grid.spec import grid_from_dict
from ragleak.grid.store import RunStore
from ragleak.rag.speed import measure_speed, save_speed

# 5 attacks (fixed pool, conversations, membership probes, two agents) x 4 defenses (none, a
# post-generation masker, two that change what the model reads) = 20 cells on a 30-document corpus;
# two passages per prompt and 3-4 queries per cell keep it to ~25 minutes on a machine shared with
# other work (rates there ran 5-7x below an idle core's)
GRID = {
    "name": "bench-eta",
    "attacks": ["ps", "pm", "mi", "rag-thief", "deal"],
    "defenses": ["none", "pad-regex", "dp-retrieval", "lprag"],
    "corpora": ["synthetic-corp"],
    "epsilons": [1.0],
    "budgets": {"ps": 3, "pm": 3, "rag-thief": 3, "deal": 3},
    "attack_params": {"ps": {"pool": "shared-extraction", "pool_version": "2"},
                      "pm": {"pool": "shared-extraction", "pool_version": "2"},
                      "mi": {"scorers": ["heuristic"], "n_members": 2, "n_nonmembers": 2, "kb_size": 20}},
    "corpus_params": {"synthetic-corp": {"n_docs": 30}},
    "stack": {"top_k": 2},
}


def scaled(grid: dict, scale: int) -> dict:
    mi = grid["attack_params"]["mi"]
    return {**grid, "budgets": {a: b * scale for a, b in grid["budgets"].items()},
            "attack_params": {**grid["attack_params"], "mi": {**mi, "n_members": mi["n_members"] * scale,
                                                               "n_nonmembers": mi["n_nonmembers"] * scale}}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(f"benchmarks/results/bench_eta-{date.today()}.json"))
    ap.add_argument("--keep", type=Path, default=None, help="run into this folder and keep it")
    ap.add_argument("--scale", type=int, default=1, help="budgets and MI candidates times this")
    args = ap.parse_args()
    grid = scaled(GRID, args.scale)
    config = grid_from_dict(grid)
    cells = config.expand()
    model = config.stack.model
    load_before = os.getloadavg()
    speed = measure_speed(model, 1)
    save_speed(model, speed)
    rates = {model: Rates(speed["prefill_tok_s"], speed["decode_tok_s"])}
    dry = grid_eta(cells, rates, workers=1)
    estimates = cell_seconds(cells, rates)

    tenth = math.ceil(0.1 * len(cells))
    seen: dict[str, float | int | None] = {}

    def progress(state: Progress) -> None:
        if state.done >= tenth and "eta_s" not in seen:
            seen.update(after_cells=state.done, eta_s=state.eta_s, at_s=time.monotonic() - t0)

    run_dir = args.keep or Path(tempfile.mkdtemp(prefix="bench-eta-")) / "run"
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    t0 = time.monotonic()
    state = run_grid(config, run_dir, workers=1, progress=progress, cells=cells)
    wall = time.monotonic() - t0
    records = {r.cell_id: r for r in RunStore(run_dir).records()}
    remaining = wall - float(seen["at_s"])  # type: ignore[arg-type]
    live = float(seen["eta_s"])  # type: ignore[arg-type]
    ratio = wall / dry.expected_s  # type: ignore[operator]
    report = {
        "machine": {"python": platform.python_version(), "cpu": platform.processor() or platform.machine(),
                    "cores": os.cpu_count(), "loadavg_before": list(load_before), "loadavg_after": list(os.getloadavg())},
        "started_at": started_at, "scale": args.scale, "grid": grid, "workers": 1, "model_threads": 1,
        "rates": {"model": model, **{k: speed[k] for k in ("prefill_tok_s", "prefill_tok_s_range", "decode_tok_s",
                                                          "decode_tok_s_range", "load_1m")}},
        "cells": dry.cells, "streams": dry.streams, "model_calls_estimated": dry.model_calls,
        "model_calls_measured": state.model_calls, "errors": state.errors, "failed": state.failed,
        "expected_s": round(dry.expected_s, 1), "upper_s": round(dry.upper_s, 1),  # type: ignore[arg-type]
        "measured_s": round(wall, 1), "ratio": round(ratio, 3),
        "ratio_to_upper": round(wall / dry.upper_s, 3),  # type: ignore[operator]
        "live": {"after_cells": seen["after_cells"], "eta_s": round(live, 1), "remaining_s": round(remaining, 1),
                 "ratio": round(remaining / live, 3)},
        "acceptance": {"ratio_within_0.6_1.6": 0.6 <= ratio <= 1.6,
                       "live_within_1.5x": 1 / 1.5 <= remaining / live <= 1.5},
        "per_cell": [{"cell": c.label, "estimated_s": round(estimates[c.cell_id][0], 1),
                      "upper_s": round(estimates[c.cell_id][1], 1),
                      "measured_s": records[c.cell_id].timings.get("total_s") if c.cell_id in records else None,
                      "status": records[c.cell_id].status if c.cell_id in records else None,
                      "model_calls": records[c.cell_id].usage.model_calls if c.cell_id in records else None}
                     for c in cells],
    }
    text = json.dumps(report, indent=2)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text + "\n", encoding="utf-8")
    sys.stdout.write(text + "\n")


if __name__ == "__main__":
    main()
