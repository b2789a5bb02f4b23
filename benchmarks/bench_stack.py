"""Speed of the default stack, as JSON on stdout.

Measures: embedding throughput (docs/s), index build and query latency, prefill and decode
tokens/s through ragleak's generator vs the same calls on llama-cpp-python directly (the
overhead ratio), and generation-cache hit latency.

    .venv/bin/python benchmarks/bench_stack.py [--model NAME] [--threads N] [--docs N] [--repeats R]
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


def best_and_median(samples: list[float]) -> dict:
    return {"best": round(min(samples), 5), "median": round(statistics.median(samples), 5), "n": len(samples)}


def timed(fn, repeats: int) -> tuple[list[float], object]:
    samples, result = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        samples.append(time.perf_counter() - t0)
    return samples, result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--docs", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--decode-tokens", type=int, default=64)
    args = ap.parse_args()

    from ragleak.corpora import load_corpus
    from ragleak.corpora.chunking import chunk_documents
    from ragleak.config import StackConfig
    from ragleak.rag.generator import DecodingParams
    from ragleak.rag.index import PassageIndex
    from ragleak.rag.prompt import build_rag_messages
    from ragleak.stack import Stack

    report: dict = {"machine": {"python": platform.python_version(), "cpu": platform.processor() or platform.machine()},
                    "args": vars(args)}

    # -- embedder and index ----------------------------------------------------------------
    cache_dir = tempfile.TemporaryDirectory()
    stack = Stack(StackConfig(model=args.model, n_threads=args.threads), cache_path=Path(cache_dir.name) / "c.sqlite")
    embedder = stack.embedder()
    embedder.prepare()
    docs = load_corpus("synthetic-corp", n_docs=args.docs)
    passages = chunk_documents(docs)
    texts = [p.text for p in passages]
    samples, _ = timed(lambda: embedder.encode(texts), args.repeats)
    report["embed"] = {"passages": len(texts), "docs_per_s": round(len(texts) / min(samples), 1),
                       "seconds": best_and_median(samples)}
    samples, index = timed(lambda: PassageIndex.build(passages, embedder), 1)
    report["index_build_s"] = round(samples[0], 3)
    queries = [f"What is the phone number of the client in record {i}?" for i in range(50)]
    samples, _ = timed(lambda: [index.search(q, 5) for q in queries], args.repeats)
    report["query_latency_ms"] = {"per_query_incl_embedding": round(1000 * min(samples) / len(queries), 3)}
    vecs = embedder.encode(queries)
    samples, _ = timed(lambda: index._faiss.search(vecs, 5), args.repeats)
    report["query_latency_ms"]["faiss_search_only"] = round(1000 * min(samples) / len(queries), 4)
    with tempfile.TemporaryDirectory() as tmp:
        samples, _ = timed(lambda: index.save(Path(tmp) / "idx"), 1)
        report["index_save_s"] = round(samples[0], 3)
        samples, _ = timed(lambda: PassageIndex.load(Path(tmp) / "idx", embedder), 1)
        report["index_load_s"] = round(samples[0], 3)

    # -- generator: ragleak vs llama-cpp-python directly -------------------------------------
    gen = stack.generator().inner  # the loaded model itself, timed against llama.cpp called directly
    gen.prepare()
    context = [h.passage for h in index.search("client record phone number email", 5)]
    messages = build_rag_messages("Summarise every record in the context in detail.", context)
    prompt = gen.render(messages)
    tokens = gen.tokenize(prompt)
    llm = gen.llm

    def direct(max_tokens: int):
        llm.reset()
        return llm.create_completion(tokens, max_tokens=max_tokens, temperature=0.0, top_k=1, top_p=1.0,
                                     min_p=0.0, repeat_penalty=1.0, seed=0, stop=["<|im_end|>", "<|endoftext|>"])

    def ours(max_tokens: int):
        return gen.complete(prompt, DecodingParams(max_tokens=max_tokens))

    direct(1)  # warm-up: the first call in a process is slower
    rows = {}
    for label, fn in (("llama_cpp_direct", direct), ("ragleak", ours)):
        pre, _ = timed(lambda: fn(1), args.repeats)
        full, out = timed(lambda: fn(args.decode_tokens), args.repeats)
        produced = out["usage"]["completion_tokens"] if isinstance(out, dict) else out.completion_tokens
        decode_s = max(min(full) - min(pre), 1e-9)
        rows[label] = {"prompt_tokens": len(tokens), "prefill_tok_s": round(len(tokens) / min(pre), 1),
                       "decode_tokens": produced, "decode_tok_s": round(max(produced - 1, 1) / decode_s, 1),
                       "end_to_end_s": best_and_median(full)}
    rows["overhead_ratio"] = round(rows["ragleak"]["end_to_end_s"]["best"] / rows["llama_cpp_direct"]["end_to_end_s"]["best"], 4)
    report["generator"] = rows

    # -- cache -------------------------------------------------------------------------------
    cached = stack.generator()  # the same model behind the stack's generation cache
    params = DecodingParams(max_tokens=16)
    cached.generate(messages, params)
    samples, _ = timed(lambda: cached.generate(messages, params), 50)
    report["cache_hit_ms"] = best_and_median([s * 1000 for s in samples])
    report["cache_hit_ms"]["model_calls_during_hits"] = cached.misses - 1
    cache_dir.cleanup()

    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
