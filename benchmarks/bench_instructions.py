"""The instruction axis against an input intent filter, as JSON: composite extraction prompts
(PS, its default pool) with each packaged instruction, without a defense and under
``intent-filter``, scored by the share of distinct retrieved chunks leaked (``retrieved_chunk_leak``,
bootstrap interval over queries). LeakDojo (Findings ACL 2026) reports that instructions worded as
a benign task on the retrieved text pass intent filters that stop the plain "repeat the context".

    PYTHONPATH=src RAGLEAK_THREADS=1 .venv/bin/python benchmarks/bench_instructions.py \\
        [--corpus synthetic-corp] [--budget 10] [--instructions repeat,sort-sentences,...]
        [--defenses intent-filter,none] [--cache FILE] [--out FILE]

Every run uses the packaged stack (greedy decoding, one model thread) and a fresh generation cache
in a temporary folder unless ``--cache`` names one to keep (a killed run then resumes cheaply);
decoding is greedy, so a rerun reproduces the transcripts.
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from datetime import date
from pathlib import Path

from ragleak.attacks import make_attack
from ragleak.attacks.instructions import load_instructions
from ragleak.config import StackConfig
from ragleak.corpora import load_corpus
from ragleak.defenses import make_defense
from ragleak.measure import run_attack
from ragleak.pipeline import build_target
from ragleak.stack import Stack


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default="synthetic-corp")
    ap.add_argument("--budget", type=int, default=10)
    ap.add_argument("--instructions", default=",".join(load_instructions().instructions))
    ap.add_argument("--defenses", default="none,intent-filter")
    ap.add_argument("--cache", type=Path, default=None, help="a generation cache to keep (default: a fresh temporary one)")
    ap.add_argument("--out", type=Path, default=Path(f"benchmarks/results/bench_instructions-{date.today()}.json"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        stack = Stack(StackConfig(n_threads=1), cache_path=args.cache or Path(tmp) / "generations.sqlite")
        index = stack.index(load_corpus(args.corpus))
        rows = []
        for defense in args.defenses.split(","):
            for instruction in args.instructions.split(","):
                attack = make_attack("ps", instruction=instruction)
                ctx = stack.context(0)
                t0 = time.perf_counter()
                run = run_attack(attack, build_target(stack, index, make_defense(defense), ctx=ctx), ctx,
                                 index.passages, budget=args.budget)
                leak = run.metrics["retrieved_chunk_leak"]
                rows.append({"defense": defense, "instruction": instruction, "value": leak.value,
                             "interval": leak.interval, "retrieved": leak.details.get("retrieved"),
                             "leaked": leak.details.get("leaked"), "queries": leak.n,
                             "refused": sum(1 for q in run.transcript.answered
                                            if q.trace is not None and not q.trace.context),
                             "seconds": round(time.perf_counter() - t0, 1)})
                print(json.dumps(rows[-1]), flush=True)
    result = {"benchmark": "bench_instructions", "date": str(date.today()), "corpus": args.corpus,
              "budget": args.budget, "attack": "ps (default pool shared-extraction v1)",
              "metric": "retrieved_chunk_leak (ROUGE-L recall >= 0.5, distinct retrieved chunks)",
              "machine": platform.machine(), "note": "timings on a 2-core machine shared with other work",
              "command": "PYTHONPATH=src RAGLEAK_THREADS=1 .venv/bin/python benchmarks/bench_instructions.py",
              "rows": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
