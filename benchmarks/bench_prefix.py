"""Prefix reuse in multi-turn conversations: prefill cost per turn and exactness, as JSON.

The conversations are a grid's ``multi`` mode: PS pool queries (``shared-extraction`` v2) chained
``--turns`` at a time, each turn retrieved (real MiniLM + FAISS, top-5) from a ``synthetic-corp``
index and prompted with the conversation so far, as the pipeline prompts it. The history is the
one-shot mode's answers, so both modes see the same prompts.

* **Prefill per turn.** Each turn's prompt is replayed with one decoded token in the one-shot
  mode (the whole prompt prefilled) and in the prefix-reuse mode right after the conversation's
  previous turn (``DecodingParams.reuse_prefix``: only the messages that prompt did not share are
  prefilled), the order alternating between rounds. Reported per turn: prompt tokens, tokens the
  reuse mode prefilled, seconds and CPU seconds of both, and seconds per prefilled token (the
  target: a turn's prefill cost proportional to its new tokens).
* **Exactness.** Every turn generated to ``--max-tokens`` in both modes: the fraction of texts
  identical, and where not, the first differing token. And the claim the cache rests on: the
  reuse mode's text for a prompt generated cold (after an unrelated prompt cleared the context)
  equals its text generated warm.

    PYTHONPATH=src RAGLEAK_THREADS=1 .venv/bin/python benchmarks/bench_prefix.py \\
        [--conversations 3] [--turns 3] [--max-tokens 64] [--rounds 2] [--docs 60] \\
        [--out benchmarks/results/bench_prefix-2026-12-05.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

from bench_batched import first_difference


def conversations(n: int, turns: int, docs: int, max_tokens: int):
    """``n`` conversations of ``turns`` pool queries, answered one-shot: per turn, the messages
    and the one-shot generation."""
    from ragleak.attacks.pools import load_pool
    from ragleak.config import StackConfig
    from ragleak.corpora import load_corpus
    from ragleak.pipeline.build import build_target
    from ragleak.rag.generator import DecodingParams
    from ragleak.rag.prompt import build_rag_messages
    from ragleak.records import Turn
    from ragleak.stack import Stack

    stack = Stack(StackConfig(n_threads=1, use_cache=False))
    pipeline = build_target(stack, stack.index(load_corpus("synthetic-corp", n_docs=docs, seed=0))).pipeline
    llm = stack.generator().inner  # the LlamaCppGenerator: no cache between the modes compared
    pool = load_pool("shared-extraction", "2").items
    params = DecodingParams(max_tokens=max_tokens)
    out = []
    for c in range(n):
        history, rows = [], []
        for t in range(turns):
            query = pool[(c * turns + t) % len(pool)]
            messages = build_rag_messages(query, pipeline.retrieve(query).context, pipeline.system_prompt, history)
            generation = llm.generate(messages, params)
            rows.append((messages, generation))
            history = history + [Turn(query=query, answer=generation.text)]
        out.append(rows)
    return llm, out


def _timed(llm, messages, params):
    before = llm.prefilled_tokens
    wall, cpu = time.perf_counter(), time.process_time()
    generation = llm.generate(messages, params)
    return generation, llm.prefilled_tokens - before, time.perf_counter() - wall, time.process_time() - cpu


def prefill_round(llm, convs, reuse_first: bool) -> list[dict]:
    """Each turn replayed with one decoded token in both modes; the reuse mode runs the
    conversation's turns in order, so each turn finds its predecessor's state."""
    from ragleak.rag.generator import DecodingParams

    one_shot, reuse = DecodingParams(max_tokens=1), DecodingParams(max_tokens=1, reuse_prefix=True)

    def run_reuse():
        rows = []
        for conv in convs:
            llm.generate([conv[0][0][0]], DecodingParams(max_tokens=1))  # a cold start per conversation
            rows.append([_timed(llm, messages, reuse) for messages, _ in conv])
        return rows

    def run_one_shot():
        return [[_timed(llm, messages, one_shot) for messages, _ in conv] for conv in convs]

    if reuse_first:
        r, o = run_reuse(), run_one_shot()
    else:
        o, r = run_one_shot(), run_reuse()
    rows = []
    for c, conv in enumerate(convs):
        for t in range(len(conv)):
            (_, po, wo, co), (_, pr, wr, cr) = o[c][t], r[c][t]
            rows.append({"conversation": c, "turn": t + 1, "prompt_tokens": po, "reuse_prefilled_tokens": pr,
                         "one_shot_s": round(wo, 3), "reuse_s": round(wr, 3),
                         "one_shot_cpu_s": round(co, 3), "reuse_cpu_s": round(cr, 3)})
    return rows


def exactness(llm, convs, max_tokens: int) -> dict:
    from ragleak.rag.generator import DecodingParams

    reuse = DecodingParams(max_tokens=max_tokens, reuse_prefix=True)
    rows = []
    for conv in convs:
        llm.generate([conv[0][0][0]], DecodingParams(max_tokens=1))
        warm = [llm.generate(messages, reuse) for messages, _ in conv]
        for t, ((messages, one_shot), w) in enumerate(zip(conv, warm)):
            llm.generate([messages[0]], DecodingParams(max_tokens=1))  # clears the kept state
            cold = llm.generate(messages, reuse)
            char = first_difference(one_shot.text, w.text)
            rows.append({"turn": t + 1, "identical_to_one_shot": char is None,
                         "first_divergence_token": None if char is None else
                         first_difference(llm.tokenize(one_shot.text), llm.tokenize(w.text)),
                         "warm_equals_cold": (w.text, w.completion_tokens) == (cold.text, cold.completion_tokens),
                         "completion_tokens": [one_shot.completion_tokens, w.completion_tokens]})
    same = sum(r["identical_to_one_shot"] for r in rows)
    return {"n": len(rows), "identical_to_one_shot": same, "fraction_identical": round(same / len(rows), 4),
            "warm_equals_cold": sum(r["warm_equals_cold"] for r in rows), "turns": rows}


def summarise(rows: list[dict]) -> dict:
    by_turn = {}
    for turn in sorted({r["turn"] for r in rows}):
        sel = [r for r in rows if r["turn"] == turn]
        by_turn[turn] = {
            "prompt_tokens": statistics.mean(r["prompt_tokens"] for r in sel),
            "reuse_prefilled_tokens": statistics.mean(r["reuse_prefilled_tokens"] for r in sel),
            "one_shot_cpu_s": round(statistics.mean(r["one_shot_cpu_s"] for r in sel), 3),
            "reuse_cpu_s": round(statistics.mean(r["reuse_cpu_s"] for r in sel), 3),
            "one_shot_cpu_ms_per_prompt_token": round(1000 * sum(r["one_shot_cpu_s"] for r in sel)
                                                      / sum(r["prompt_tokens"] for r in sel), 2),
            "reuse_cpu_ms_per_prefilled_token": round(1000 * sum(r["reuse_cpu_s"] for r in sel)
                                                      / max(1, sum(r["reuse_prefilled_tokens"] for r in sel)), 2),
            "reuse_over_one_shot_cpu": round(sum(r["reuse_cpu_s"] for r in sel)
                                             / sum(r["one_shot_cpu_s"] for r in sel), 3),
        }
    return by_turn


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--conversations", type=int, default=3)
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--docs", type=int, default=60)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    import os

    result = {"benchmark": "bench_prefix", "machine": {"python": platform.python_version(), "cpu": platform.machine(),
                                                        "load_avg_at_start": list(os.getloadavg())},
              "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}}

    def save():
        text = json.dumps(result, indent=2)
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(text + "\n")
        return text

    llm, convs = conversations(args.conversations, args.turns, args.docs, args.max_tokens)
    result["model"] = llm.spec.name
    rows = []
    for r in range(args.rounds):
        rows += [dict(row, round=r) for row in prefill_round(llm, convs, reuse_first=r % 2 == 0)]
        result["prefill"] = {"by_turn": summarise(rows), "rows": rows}
        save()
    result["exactness"] = exactness(llm, convs, args.max_tokens)
    result["machine"]["load_avg_at_end"] = list(os.getloadavg())
    print(save())


if __name__ == "__main__":
    main()
