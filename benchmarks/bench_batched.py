"""Batched vs one-at-a-time generation of independent RAG queries: exactness and tokens/s, as JSON.

The prompts are a PS cell's: the first ``--n`` queries of the ``shared-extraction`` pool, each
retrieved (real MiniLM + FAISS, top-5) from a ``synthetic-corp`` index and rendered as the
pipeline renders them. Each round generates them one at a time (``LlamaCppGenerator.generate``,
llama-cpp-python's completion) and batched (``generate_many``: one llama.cpp context, one
``llama_decode`` per step for every unfinished sequence), the order alternating between rounds
so that load on a shared machine falls on both. No generation cache is involved.

Exactness is per prompt: the batched text equals the one-at-a-time text, and where it does not,
the first differing character and token (both texts re-tokenised by the model's tokenizer). It
is checked on the RAG prompts of every round and once on open-ended prompts ("Write a long story
about a cat number i."), whose near-tied next tokens show a difference in rounding first.
Speed is completion tokens per second of each mode, prefill included, and the ratio
batched/one-at-a-time per round (the issue's target: >= 1.5x for 8 queries), both per wall-clock
second and per second of this process's CPU time (llama.cpp on one thread: the CPU-time ratio is
what a shared machine's load does not move, so the target is judged on it). Each round also
splits each mode into its phases: a pass at ``max_tokens=1`` (prefill and the first token) is
timed the same way, and the *decode phase* is the rest: the completion tokens after each query's
first, per CPU-second of the full run less that pass. Batching shares a decode step between
sequences; it cannot share a prefill, which is most of a ~700-token RAG prompt's cost here.
``batched_weights`` says which file the batched mode decoded with (``rag.exact_q8``: the
verified Q8_0 copy of a Q5_0 model, whose logits are the original's bit for bit).

    PYTHONPATH=src RAGLEAK_THREADS=1 .venv/bin/python benchmarks/bench_batched.py \\
        [--models qwen2.5-coder-0.5b,smollm2-135m] [--n 8] [--max-tokens 256] [--rounds 2] \\
        [--out benchmarks/results/bench_batched-2026-12-04.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path


def rag_prompts(n: int, docs: int):
    """The first ``n`` PS pool queries as the pipeline would prompt the model with them."""
    from ragleak.attacks.pools import load_pool
    from ragleak.config import StackConfig
    from ragleak.pipeline.build import build_target
    from ragleak.rag.prompt import build_rag_messages
    from ragleak.stack import Stack

    stack = Stack(StackConfig(n_threads=1, use_cache=False))
    pipeline = build_target(stack, stack.index_corpus("synthetic-corp", seed=0) if docs <= 0 else
                            stack.index(_corpus(docs))).pipeline
    pool = load_pool("shared-extraction", "1").items
    queries = [pool[i % len(pool)] for i in range(n)]
    return queries, [build_rag_messages(q, pipeline.retrieve(q).context, pipeline.system_prompt) for q in queries]


def _corpus(n_docs: int):
    from ragleak.corpora import load_corpus

    return load_corpus("synthetic-corp", n_docs=n_docs, seed=0)


def first_difference(a, b) -> int | None:
    """Index of the first position where sequences ``a`` and ``b`` differ (None: equal)."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def exactness(generator, single, batched) -> dict:
    rows = []
    for s, b in zip(single, batched):
        char = first_difference(s.text, b.text)
        token = first_difference(generator.tokenize(s.text), generator.tokenize(b.text)) if char is not None else None
        rows.append({"identical": char is None, "first_divergence_char": char, "first_divergence_token": token,
                     "completion_tokens": [s.completion_tokens, b.completion_tokens],
                     "finish_reason": [s.finish_reason, b.finish_reason]})
    same = sum(r["identical"] for r in rows)
    return {"identical": same, "n": len(rows), "fraction_identical": round(same / len(rows), 4), "prompts": rows}


def bench_model(model: str, messages, args, save) -> dict:
    """Exactness on open-ended prompts, then ``--rounds`` interleaved rounds on the RAG prompts;
    ``save(result)`` is called after each stage, so a run cut short still leaves what it measured."""
    from ragleak.rag.generator import DecodingParams, Generation, LlamaCppGenerator
    from ragleak.rag.prompt import ChatMessage

    generator = LlamaCppGenerator(model, n_threads=args.threads)
    generator.generate(messages[0], DecodingParams(max_tokens=1))  # load the weights outside the timings
    generator.generate_many(messages[:2], DecodingParams(max_tokens=1))
    # which file the batched mode decodes with: the verified Q8_0 copy (rag.exact_q8) or the original
    result: dict = {"model": model, "batched_weights": generator._multi().weights}

    # open-ended prompts, whose next-token margins are small (many continuations fit): where
    # batched and one-at-a-time decoding round differently, it shows here first
    open_ended = [[ChatMessage(role="user", content=f"Write a long story about a cat number {i}.")]
                  for i in range(len(messages))]
    short = DecodingParams(max_tokens=args.open_max_tokens)
    result["exactness_open_ended"] = {"prompt": "Write a long story about a cat number {i}.",
                                      "max_tokens": args.open_max_tokens,
                                      **exactness(generator, [generator.generate(m, short) for m in open_ended],
                                                  generator.generate_many(open_ended, short))}
    save(result)

    params, first_token = DecodingParams(max_tokens=args.max_tokens), DecodingParams(max_tokens=1)

    def run(mode: str, p: DecodingParams) -> tuple[float, float, list]:
        t0, c0 = time.perf_counter(), time.process_time()
        out = [generator.generate(m, p) for m in messages] if mode == "single" else generator.generate_many(messages, p)
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        failed = [o for o in out if not isinstance(o, Generation)]
        if failed:
            raise SystemExit(f"{model} {mode}: {failed[0]}")
        return seconds, cpu, out

    rounds, checks = [], []
    for r in range(args.rounds):
        timed = {}
        for mode in (("single", "batched") if r % 2 == 0 else ("batched", "single")):
            seconds, cpu, out = run(mode, params)
            _, prefill_cpu, _ = run(mode, first_token)
            tokens = sum(o.completion_tokens for o in out)
            later = tokens - sum(1 for o in out if o.completion_tokens > 0)
            decode_cpu = cpu - prefill_cpu
            timed[mode] = {"seconds": round(seconds, 3), "cpu_seconds": round(cpu, 3), "completion_tokens": tokens,
                           "prompt_tokens": sum(o.prompt_tokens for o in out),
                           "tokens_per_s": round(tokens / seconds, 3), "tokens_per_cpu_s": round(tokens / cpu, 3),
                           "first_token_pass_cpu_seconds": round(prefill_cpu, 3),
                           "decode_phase": {"tokens": later, "cpu_seconds": round(decode_cpu, 3),
                                            "tokens_per_cpu_s": round(later / decode_cpu, 3) if decode_cpu > 0 else None},
                           "outputs": out}
        checks.append(exactness(generator, timed["single"]["outputs"], timed["batched"]["outputs"]))
        s, b = timed["single"], timed["batched"]
        sd, bd = s["decode_phase"]["tokens_per_cpu_s"], b["decode_phase"]["tokens_per_cpu_s"]
        rounds.append({"first": "single" if r % 2 == 0 else "batched",
                       **{m: {k: v for k, v in t.items() if k != "outputs"} for m, t in timed.items()},
                       "speedup_tokens_per_s": round(b["tokens_per_s"] / s["tokens_per_s"], 3),
                       "speedup_tokens_per_cpu_s": round(b["tokens_per_cpu_s"] / s["tokens_per_cpu_s"], 3),
                       "speedup_decode_phase_per_cpu_s": round(bd / sd, 3) if sd and bd else None})
        wall = statistics.median(x["speedup_tokens_per_s"] for x in rounds)
        cpu = statistics.median(x["speedup_tokens_per_cpu_s"] for x in rounds)
        decode = [x["speedup_decode_phase_per_cpu_s"] for x in rounds if x["speedup_decode_phase_per_cpu_s"]]
        decode_median = round(statistics.median(decode), 3) if decode else None
        n = sum(c["n"] for c in checks)
        same = sum(c["identical"] for c in checks)
        result.update({"exactness_rag": {"max_tokens": args.max_tokens, "identical": same, "n": n,
                                         "fraction_identical": round(same / n, 4), "rounds": checks},
                       "rounds": rounds, "speedup_median": round(wall, 3), "speedup_cpu_median": round(cpu, 3),
                       "speedup_decode_phase_cpu_median": decode_median,
                       # judged per CPU-second: a wall-clock ratio moves with the machine's other load
                       "meets_target_1_5x": {"whole_generation": cpu >= 1.5,
                                             "decode_phase": decode_median is not None and decode_median >= 1.5}})
        save(result)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="qwen2.5-coder-0.5b", help="comma-separated packaged model names")
    ap.add_argument("--n", type=int, default=8, help="independent queries")
    ap.add_argument("--max-tokens", type=int, default=256, help="the cells' default answer cap")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--open-max-tokens", type=int, default=32, help="tokens of the open-ended exactness check")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--docs", type=int, default=60, help="synthetic-corp documents indexed")
    ap.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    args = ap.parse_args()

    t0 = time.perf_counter()
    queries, messages = rag_prompts(args.n, args.docs)
    report = {"benchmark": "bench_batched", "machine": {"python": platform.python_version(),
                                                        "cpu": platform.processor() or platform.machine()},
              "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
              "queries": queries, "models": [],
              "note": "ratios from interleaved rounds on a shared machine; absolute rates are under load; "
                      "cpu_seconds is this process's CPU time (llama.cpp on --threads threads)",
              "complete": False, "seconds": None}

    def save(result: dict | None = None) -> None:
        if result is not None and result not in report["models"]:
            report["models"].append(result)
        report["seconds"] = round(time.perf_counter() - t0, 1)
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")

    for model in args.models.split(","):
        bench_model(model, messages, args, save)
    report["complete"] = True
    save()
    sys.stdout.write(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
