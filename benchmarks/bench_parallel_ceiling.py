"""The machine's own ceiling for 2 workers, as JSON: the same generation job in one process alone
and in two processes at once, with no ragleak scheduling, cache or index in between.

Each process loads the model (``LlamaCppGenerator``, one llama.cpp thread, as a grid worker)
before a shared start barrier, then generates the same RAG prompts one at a time (the first
``--n`` PS pool queries over a synthetic-corp index, rendered as the pipeline renders them; no
generation cache). The ceiling is the throughput of two concurrent processes over one alone:
``2 * t_alone / t_pair``, where ``t_pair`` is the slower of the pair. Two llama.cpp processes
share the memory bus and the last-level cache, so on a 2-core machine the ceiling is below 2.0;
a grid's 2-worker speedup (``bench_schedule.py``, issue 18's 1.8x target) can at most reach it.
Alone and paired runs alternate (``--rounds``) so a drifting load falls on both.

    PYTHONPATH=src RAGLEAK_THREADS=1 .venv/bin/python benchmarks/bench_parallel_ceiling.py \\
        [--n 4] [--max-tokens 48] [--rounds 2] [--out benchmarks/results/bench_parallel_ceiling-DATE.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from datetime import date
from multiprocessing import get_context
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_batched import rag_prompts  # noqa: E402


def job(messages, max_tokens: int, barrier) -> dict:
    """Load the model, wait for the start, generate every prompt; wall and CPU seconds of that."""
    from ragleak.rag.generator import DecodingParams, LlamaCppGenerator

    generator = LlamaCppGenerator("qwen2.5-coder-0.5b", n_threads=1)
    generator.generate(messages[0], DecodingParams(max_tokens=1))  # the weights, outside the timing
    params = DecodingParams(max_tokens=max_tokens)
    barrier.wait()
    t0, c0 = time.perf_counter(), time.process_time()
    tokens = sum(generator.generate(m, params).completion_tokens for m in messages)
    return {"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0, "completion_tokens": tokens}


def run(processes: int, messages, max_tokens: int) -> dict:
    ctx = get_context("spawn")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(processes)
        with ctx.Pool(processes) as pool:
            load = os.getloadavg()[0]
            results = pool.starmap(job, [(messages, max_tokens, barrier)] * processes)
    return {"processes": processes, "loadavg_before": round(load, 2),
            "per_process": [{k: round(v, 3) if isinstance(v, float) else v for k, v in r.items()} for r in results],
            "slowest_wall_s": round(max(r["wall_s"] for r in results), 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4, help="RAG prompts per job")
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", type=Path,
                    default=Path(__file__).parent / "results" / f"bench_parallel_ceiling-{date.today()}.json")
    args = ap.parse_args()
    _, messages = rag_prompts(args.n, docs=0)
    rounds = []
    for i in range(args.rounds):
        order = (1, 2) if i % 2 == 0 else (2, 1)
        runs = {p: run(p, messages, args.max_tokens) for p in order}
        alone, pair = runs[1]["slowest_wall_s"], runs[2]["slowest_wall_s"]
        rounds.append({"alone": runs[1], "pair": runs[2], "ceiling_2_over_1": round(2 * alone / pair, 3),
                       "pair_slowdown_per_process": round(pair / alone, 3)})
    report = {
        "machine": {"python": platform.python_version(), "cpu": platform.processor() or platform.machine(),
                    "cores": os.cpu_count()},
        "args": {k: str(v) for k, v in vars(args).items()}, "rounds": rounds,
        "ceiling_2_over_1": [r["ceiling_2_over_1"] for r in rounds],
        "note": "two identical single-thread llama.cpp jobs at once vs one alone; no ragleak scheduling involved",
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
