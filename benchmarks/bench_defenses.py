"""Seconds per answered query of each defense on the default stack, as JSON on stdout.

Every defense answers the same questions over the same small synthetic-corp index with an
uncached generator (every answer is a real model run). Private-RAG also reports its per-query
log (active documents, relevant, charged, voting agreement), the U(t) its report plots.

``--multiseq-weights both`` runs each defense twice per round, its lock-step decoder on the
verified Q8_0 copy (``rag.exact_q8``, the default) and on the original file, alternating which goes
first, and reports both timings (wall and this process's CPU) and whether the answers are equal
(same seed, same DP noise: equal logits give equal answers).

    .venv/bin/python benchmarks/bench_defenses.py [--defenses none,private-rag,...] [--queries N]
        [--docs N] [--threads N] [--max-tokens N] [--multiseq-weights exact|original|both] [--rounds N] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

DEFAULT_DEFENSES = "none,dp-retrieval,ca-dp,private-rag,pad,pad-regex,lprag,dp-vote,dp-synthetic"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--defenses", default=DEFAULT_DEFENSES)
    ap.add_argument("--queries", type=int, default=4)
    ap.add_argument("--docs", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--multiseq-weights", choices=["exact", "original", "both"], default="exact")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()

    from ragleak.config import StackConfig
    from ragleak.corpora import load_corpus
    from ragleak.defenses import make_defense
    from ragleak.pipeline.build import build_target
    from ragleak.rag import multiseq
    from ragleak.stack import Stack

    # no cache: every query is timed on the model
    stack = Stack(StackConfig(model=args.model, n_threads=args.threads, decoding={"max_tokens": args.max_tokens},
                              use_cache=False))
    docs = load_corpus("synthetic-corp", n_docs=args.docs)
    index = stack.index(docs)
    generator = stack.generator("target").inner
    generator.prepare()
    # questions with a gold answer (the record's e-mail address), cycling over the first documents so
    # that private-rag's per-document budgets run out: its U(t) then shows retired documents
    asked = [docs[i % 3] for i in range(args.queries)]
    questions = [f"What is the e-mail address of {str(d.metadata['person']).split(';')[0]}?" for d in asked]
    gold = [str(d.metadata["email"]) for d in asked]
    report: dict = {"machine": {"python": platform.python_version(), "cpu": platform.processor() or platform.machine()},
                    "args": {k: str(v) for k, v in vars(args).items()}, "defenses": {}}
    def run(name: str, exact: bool) -> dict:
        multiseq.EXACT_WEIGHTS = exact
        defense = make_defense(name)
        pipeline = build_target(stack, index, defense, ctx=stack.context(0)).pipeline
        calls0, seconds, cpu, correct, answers = generator.invocations, [], [], [], []
        for q, g in zip(questions, gold):
            t0, c0 = time.perf_counter(), time.process_time()
            answer = pipeline.answer(q).answer
            seconds.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
            correct.append(g.lower() in answer.lower())
            answers.append(answer)
        later = seconds[1:] or seconds  # the first query also pays one-time work (a synthetic corpus, a decoder)
        row = {"seconds_per_query": {"median": round(statistics.median(later), 3), "max": round(max(later), 3)},
               "cpu_seconds_per_query": round(statistics.median(cpu[1:] or cpu), 3),
               "first_query_s": round(seconds[0], 3), "generator_calls": generator.invocations - calls0,
               "queries": len(seconds), "gold_in_answer": correct, "answers": answers,
               "multiseq_weights": getattr(getattr(defense, "_decoder", None), "weights", None)}
        row["state"] = defense.state()
        return row

    settings = {"exact": [True], "original": [False], "both": [True, False]}[args.multiseq_weights]
    for name in [d.strip() for d in args.defenses.split(",") if d.strip()]:
        rows: dict[str, list[dict]] = {}
        for r in range(args.rounds):
            for exact in (settings if r % 2 == 0 else settings[::-1]):
                rows.setdefault("exact" if exact else "original", []).append(run(name, exact))
        row = rows[next(iter(rows))][0] if len(settings) == 1 and args.rounds == 1 else {
            weights: {"rounds": got, "cpu_seconds_per_query_median": round(
                statistics.median(g["cpu_seconds_per_query"] for g in got), 3)} for weights, got in rows.items()}
        if len(rows) == 2:
            row["answers_equal"] = all(a["answers"] == b["answers"] for a, b in zip(rows["exact"], rows["original"]))
            row["original_over_exact_cpu"] = round(row["original"]["cpu_seconds_per_query_median"]
                                                   / row["exact"]["cpu_seconds_per_query_median"], 3)
        report["defenses"][name] = row
        print(f"{name}: {json.dumps({k: v for k, v in row.items() if k in ('seconds_per_query', 'answers_equal', 'original_over_exact_cpu')})}",
              flush=True, file=sys.stderr)
    text = json.dumps(report, indent=2)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
