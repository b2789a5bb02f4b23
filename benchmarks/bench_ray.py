"""Ray executor vs one local worker, as JSON: wall time of the same small grid (real model) on one
local worker and on Ray with 2 long-lived cell actors (``grid.ray_actors``), with each worker's
model and index loads, interleaved (local, Ray, local, Ray, ...) so both see the same machine.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_ray.py [--reps 2] [--seeds 4] [--budget 2] \
        [--max-tokens 48] [--out benchmarks/results/bench_ray-DATE.json]

Each run gets a fresh run folder and a fresh generation cache. The local worker runs in a fresh
spawned process, so it pays its model load and index build like each Ray actor does. The Ray
cluster is started once, before the first Ray run, and timed apart ("once started": the wall
time of a Ray run includes starting its actors and their loads, not the cluster). The machine's
load average is read before and after each run: on a shared machine, read the ratios, not the
absolute times. Each run also records the machine's CPU seconds over its wall time
(``/proc/stat``) and how many of them fell outside the workers: Ray's own processes share the
same 2 cores as its actors.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from datetime import date
from multiprocessing import get_context
from pathlib import Path

from ragleak.grid.runner import run_grid
from ragleak.grid.spec import grid_from_dict
from ragleak.grid.store import RunStore


def config(seeds: int, budget: int, max_tokens: int):
    # PS against none and pad-regex: pad-regex only post-processes, so each seed is one stream of
    # two cells (the twin reads the cache); `seeds` chains for 2 actors to share
    return grid_from_dict({
        "name": "bench-ray", "attacks": ["ps"], "defenses": ["none", "pad-regex"], "corpora": ["synthetic-corp"],
        "seeds": list(range(seeds)), "budget": budget, "audit": "off",
        "corpus_params": {"synthetic-corp": {"n_docs": 20}}, "stack": {"decoding": {"max_tokens": max_tokens}},
    })


def loadavg() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def _summary(state, wall: float, run: Path) -> dict:
    records = RunStore(run).records()
    return {"cells": state.total, "ran": state.ran, "errors": state.errors, "model_calls": state.model_calls,
            "cache_hits": state.cache_hits, "cache_waited": state.cache_waited, "wall_s": round(wall, 2),
            # inside the cells, summed over them: setup (corpus, index, pipeline; the first cell of a
            # worker also loads the models) and generation
            "cells_setup_s": round(sum(r.timings.get("setup_s", 0.0) for r in records), 2),
            "cells_generation_s": round(sum(r.timings.get("generation_s", 0.0) for r in records), 2)}


def _cpu_s() -> float:
    cpu = os.times()
    return round(cpu.user + cpu.system, 2)


def machine_busy_s() -> float:
    """CPU seconds every process on the machine has used since boot (``/proc/stat``: all but idle
    and iowait): a run's difference, less what its workers used, is what else ran meanwhile
    (for Ray: its GCS, raylet and agents, and the driver that feeds the actors)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    busy = sum(fields[:8]) - fields[3] - fields[4]  # user nice system idle iowait irq softirq steal
    return busy / os.sysconf("SC_CLK_TCK")


def _machine(before_busy: float, wall: float, workers_cpu: float) -> dict:
    used = machine_busy_s() - before_busy
    return {"machine_cpu_s": round(used, 2), "machine_cpu_share": round(used / (wall * (os.cpu_count() or 1)), 3),
            "outside_workers_cpu_s": round(used - workers_cpu, 2)}


def local_run(seeds: int, budget: int, max_tokens: int) -> dict:
    """One local worker, in this (fresh) process: its wall time and what it loaded."""
    os.environ["RAGLEAK_THREADS"] = "1"
    from ragleak.stack import load_counts

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        state = run_grid(config(seeds, budget, max_tokens), Path(tmp) / "run", workers=1)
        wall = time.perf_counter() - t0
        summary = _summary(state, wall, Path(tmp) / "run")
    return {**summary, "workers_detail": [{"pid": os.getpid(), "cells": state.ran, "loads": load_counts(),
                                           "cpu_s": _cpu_s(), "nice": os.nice(0)}]}


def measure_local(args) -> dict:
    before, busy = loadavg(), machine_busy_s()
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        out = pool.submit(local_run, args.seeds, args.budget, args.max_tokens).result()
    machine = _machine(busy, out["wall_s"], out["workers_detail"][0]["cpu_s"])
    return {"executor": "local", "workers": 1, **out, **machine, "loadavg_before": before, "loadavg_after": loadavg()}


def measure_ray(args) -> dict:
    before, busy = loadavg(), machine_busy_s()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        state = run_grid(config(args.seeds, args.budget, args.max_tokens), Path(tmp) / "run", executor="ray",
                         workers=2)
        wall = time.perf_counter() - t0
        summary = _summary(state, wall, Path(tmp) / "run")
    workers = [{"pid": w["pid"], "cells": len(w["cells"]), "loads": w["loads"], "cpu_s": w["cpu_s"], "nice": w["nice"]}
               for w in state.workers]
    machine = _machine(busy, wall, sum(w["cpu_s"] for w in workers))
    return {"executor": "ray", "workers": 2, **summary, "worker_restarts": state.worker_restarts,
            "workers_detail": workers, **machine, "loadavg_before": before, "loadavg_after": loadavg()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--budget", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / f"bench_ray-{date.today()}.json")
    args = ap.parse_args()
    os.environ["RAGLEAK_THREADS"] = "1"
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_worker_niceness", "0")  # actors at the local worker's priority (as grid.runner does)
    import ray

    start_load = loadavg()
    t0 = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"RAGLEAK_THREADS": "1"}})
    ray_start = time.perf_counter() - t0
    runs = []
    try:
        for rep in range(args.reps):
            for measure in (measure_local, measure_ray):
                row = {"rep": rep, **measure(args)}
                runs.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
    finally:
        ray.shutdown()
    local = [r["wall_s"] for r in runs if r["executor"] == "local"]
    remote = [r["wall_s"] for r in runs if r["executor"] == "ray"]
    report = {
        "machine": {"python": platform.python_version(), "cpu": platform.processor() or platform.machine(),
                    "cores": os.cpu_count()},
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "cells": runs[0]["cells"], "ray_cluster_start_s": round(ray_start, 2),
        "loadavg_start": start_load, "loadavg_end": loadavg(), "runs": runs,
        # each pair ran back to back; the speedup of Ray 2 actors over 1 local worker, pair by pair
        "speedup_per_rep": [round(a / b, 3) for a, b in zip(local, remote)],
        "speedup_total": round(sum(local) / sum(remote), 3),
        # CPU seconds of the one local worker over those of the busiest Ray actor, summed over the
        # reps: how far the actors' split of the work could take the speedup on two idle cores (an upper
        # bound on the wall-time speedup, which also pays for starting the actors). Not a
        # measured wall time.
        "cpu_split_ratio": round(sum(r["workers_detail"][0]["cpu_s"] for r in runs if r["executor"] == "local")
                                 / sum(max(w["cpu_s"] for w in r["workers_detail"])
                                       for r in runs if r["executor"] == "ray"), 3),
        "target": "Ray 2 workers >= 1.6x one local worker once started (issue 18)",
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    json.dump({k: report[k] for k in ("cells", "ray_cluster_start_s", "speedup_per_rep", "speedup_total",
                                           "cpu_split_ratio")},
              sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
