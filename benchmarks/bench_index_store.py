"""A grid worker's index cost, as JSON on stdout: building a corpus's index (embedding every
passage) vs loading the one another worker saved in the run folder, and an MI-style subset index
after the whole corpus (its passages already embedded in this process), in alternating rounds.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_index_store.py [--corpus synthetic-corp] [--docs 200]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default="synthetic-corp")
    ap.add_argument("--docs", type=int, default=200, help="n_docs for a synthetic corpus (ignored otherwise)")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()

    from ragleak import stack as stack_module
    from ragleak.config import StackConfig
    from ragleak.corpora import load_corpus
    from ragleak.stack import Stack

    params = {"n_docs": args.docs} if args.corpus.startswith("synthetic") else {}
    documents = load_corpus(args.corpus, **params)
    config = StackConfig(n_threads=1, use_cache=False)
    Stack(config).embedder().prepare()
    embedder_key = next(k for k in stack_module._LOADED if k[0] == "embedder")
    rows: dict[str, list[float]] = {"build_s": [], "load_s": [], "subset_after_whole_s": [], "subset_alone_s": []}

    def fresh_worker() -> Stack:
        # a new process: only the embedder's session stays loaded (model load is not what is measured)
        kept = {embedder_key: stack_module._LOADED[embedder_key]}
        stack_module._LOADED.clear()
        stack_module._LOADED.update(kept)
        return Stack(config)

    passages = 0
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory() as tmp:
            store = Path(tmp)
            t0 = time.perf_counter()
            passages = len(fresh_worker().index(documents, store=store))
            rows["build_s"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            fresh_worker().index(documents, store=store)
            rows["load_s"].append(time.perf_counter() - t0)
        kb = documents[: max(1, len(documents) // 4)]
        stack = fresh_worker()
        stack.index(documents)
        t0 = time.perf_counter()
        stack.index(kb, metadata={"kb": True})
        rows["subset_after_whole_s"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        fresh_worker().index(kb, metadata={"kb": True})
        rows["subset_alone_s"].append(time.perf_counter() - t0)
    med = {k: round(statistics.median(v), 3) for k, v in rows.items()}
    report = {
        "machine": {"python": platform.python_version(), "cpu": platform.processor() or platform.machine()},
        "args": vars(args), "passages": passages, "median": med,
        "build_over_load": round(med["build_s"] / med["load_s"], 1),
        "subset_alone_over_after_whole": round(med["subset_alone_s"] / med["subset_after_whole_s"], 1),
        "samples": {k: [round(x, 3) for x in v] for k, v in rows.items()},
    }
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
