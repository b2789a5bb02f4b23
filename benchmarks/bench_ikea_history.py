"""IKEA's per-query cost outside generation, against the length of its history, as JSON on stdout.

The attacker LLM and the target are scripted (deterministic, varied text, near-zero cost), the
encoder is the real MiniLM, so the time between two target queries is IKEA's own bookkeeping:
anchor sampling, the stop rule, the trust-region mutation, and the embeddings they need. A flat
``ms_per_query`` across history bins is the goal; ``texts_embedded_per_query`` counts the texts
the encoder saw per query (constant when only new texts are embedded). ``transcript_digest``
lets two versions of the code be compared for identical behaviour on the same script.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_ikea_history.py [--budget 128] [--bin 16]
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import re
import statistics
import sys
import time


def vocabulary() -> list[str]:
    from ragleak.corpora import load_corpus

    words = {w.lower() for d in load_corpus("synthetic-corp", n_docs=200) for w in re.findall(r"[A-Za-z]{4,12}", d.text)}
    return sorted(words)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=int, default=128, help="target queries (the final history length)")
    ap.add_argument("--bin", type=int, default=16, help="queries per reported history bin")
    ap.add_argument("--answer-words", type=int, default=60, help="words per scripted answer")
    args = ap.parse_args()

    from ragleak.attacks import make_attack
    from ragleak.attacks.base import CorpusView
    from ragleak.pipeline.target import CallableTarget
    from ragleak.records import digest
    from ragleak.stack import ROLES
    from ragleak.testing import ScriptedGenerator, tiny_stack

    words = vocabulary()
    rng = random.Random(0)

    def pick(n: int) -> list[str]:
        return rng.sample(words, n)

    def questions(prompt: str) -> str:
        anchor = re.search(r'keyword "([^"]+)"', prompt).group(1)
        return "\n".join(f"{i + 1}. How does {anchor} relate to {' and '.join(pick(2))}?" for i in range(3))

    script = {
        "anchor words": lambda prompt: json.dumps({"anchor words": pick(12)}),
        "questions around": questions,
        "single words": lambda prompt: "\n".join(f"{i + 1}. {w}" for i, w in enumerate(pick(6))),
    }
    llm = ScriptedGenerator(script)
    stack = tiny_stack(**{role: llm for role in ROLES})
    embedder = stack.embedder()
    embedder.prepare()
    embedded = {"texts": 0}
    encode = embedder.encode

    def counting_encode(texts):
        embedded["texts"] += len(texts)
        return encode(texts)

    embedder.encode = counting_encode  # this process's embedder only; the benchmark owns it
    marks: list[tuple[float, int]] = []

    def answer(query: str) -> str:
        marks.append((time.perf_counter(), embedded["texts"]))
        if len(marks) % 9 == 0:
            return "I don't know."
        return " ".join(pick(args.answer_words)).capitalize() + "."

    attack = make_attack("ikea")
    t0 = time.perf_counter()
    transcript = attack.run(CallableTarget(answer), stack.context(0), budget=args.budget,
                            corpus_view=CorpusView(topic="client records"))
    total = time.perf_counter() - t0
    marks.append((time.perf_counter(), embedded["texts"]))
    bins = []
    for start in range(0, len(marks) - 1, args.bin):
        span = marks[start:min(start + args.bin, len(marks) - 1) + 1]
        steps = len(span) - 1
        if steps < 1:
            continue
        gaps = [b[0] - a[0] for a, b in zip(span, span[1:])]
        bins.append({"history": [start, start + steps], "ms_per_query": round(1000 * statistics.median(gaps), 2),
                     "texts_embedded_per_query": round((span[-1][1] - span[0][1]) / steps, 2)})
    first, last = bins[0]["ms_per_query"], bins[-1]["ms_per_query"]
    report = {
        "machine": {"python": platform.python_version(), "cpu": platform.processor() or platform.machine()},
        "args": vars(args), "queries": len(transcript.queries), "total_s": round(total, 2),
        "bins": bins, "last_over_first_bin": round(last / first, 3) if first else None,
        "texts_embedded": embedded["texts"],
        "transcript_digest": digest({"queries": [q.query for q in transcript.queries],
                                     "answers": [q.answer for q in transcript.queries],
                                     "state": transcript.state}),
    }
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
