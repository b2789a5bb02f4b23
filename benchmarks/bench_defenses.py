"""Seconds per answered query of each defense on the default stack, as JSON on stdout.

Every defense answers the same questions over the same small synthetic-corp index with an
uncached generator (every answer is a real model run). Private-RAG also reports its per-query
log (active documents, relevant, charged, voting agreement), the U(t) its report plots.

    .venv/bin/python benchmarks/bench_defenses.py [--defenses none,private-rag,...] [--queries N]
        [--docs N] [--threads N] [--max-tokens N] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
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
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()

    from ragleak.config import StackConfig
    from ragleak.corpora import load_corpus
    from ragleak.defenses import make_defense
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
    for name in [d.strip() for d in args.defenses.split(",") if d.strip()]:
        defense = make_defense(name)
        pipeline = stack.pipeline(index, defense, stack.context(0))
        calls0, seconds, correct = generator.invocations, [], []
        for q, g in zip(questions, gold):
            t0 = time.perf_counter()
            answer = pipeline.answer(q).answer
            seconds.append(time.perf_counter() - t0)
            correct.append(g.lower() in answer.lower())
        later = seconds[1:] or seconds  # the first query also pays one-time work (a synthetic corpus, a decoder)
        row = {"seconds_per_query": {"median": round(statistics.median(later), 3), "max": round(max(later), 3)},
               "first_query_s": round(seconds[0], 3), "generator_calls": generator.invocations - calls0,
               "queries": len(seconds), "gold_in_answer": correct}
        row["state"] = defense.state()
        report["defenses"][name] = row
        print(f"{name}: {row['seconds_per_query']['median']} s/query", flush=True, file=__import__("sys").stderr)
    text = json.dumps(report, indent=2)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
