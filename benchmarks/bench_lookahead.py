"""Would verifying several drafted tokens in one step (speculative or prompt-lookup decoding) be
exact here? Bit-identity of chunked evaluation against one-token steps, and what it would buy, as JSON.

Speculative decoding (Leviathan, Kalman and Matias 2023, arXiv 2211.17192) and its prompt-lookup
form (drafts copied from the prompt, Saxena 2023) keep greedy output unchanged *in exact
arithmetic*: a drafted token is kept only where the model's argmax agrees. In floating point
they are exact only if the logits of a token evaluated inside a step of c tokens equal, bit for
bit, its logits from a step of one. RAG answers copy their context, so the drafts would often be
right, and decoding is about half of a grid's time: worth knowing.

For each prompt (a PS cell's RAG prompts, as ``bench_batched.py`` builds them), in one llama.cpp
context set up as the generator's (n_batch and n_ubatch 512, flash attention off, one thread):

* reference: the prompt prefilled in 512-token chunks, then ``--tokens`` greedy steps of one
  token, every logits row kept;
* chunked: the same prompt, then the reference's own tokens fed ``c`` at a time (c in
  ``--chunks``), logits for every row: rows differing in any bit, rows whose argmax differs (a
  greedy text would change there), the largest difference, and seconds per token against the
  reference's;
* prompt lookup, simulated on the reference tokens (no model call): drafts of up to ``--draft``
  tokens copied from where the last 3 tokens last occurred in the prompt or the answer so far;
  the verification steps a greedy answer would take and the tokens per step.

Both weight files are checked: the GGUF as the generator loads it and the verified Q8_0 copy the
lock-step decoders load (``rag.exact_q8``), each also with weight repacking off
(``use_extra_bufts``), the two mechanisms that pick kernels by batch size.

    PYTHONPATH=src RAGLEAK_THREADS=1 .venv/bin/python benchmarks/bench_lookahead.py \\
        [--n 4] [--tokens 96] [--chunks 2,4,8,16] [--draft 8] [--out benchmarks/results/bench_lookahead-DATE.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from datetime import date
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_batched import rag_prompts  # noqa: E402

N_BATCH = 512


class Context:
    """One llama.cpp context over ``model`` with a batch for up to ``N_BATCH`` tokens."""

    def __init__(self, lib, model, n_vocab: int, n_ctx: int) -> None:
        self.L, self.n_vocab = lib, n_vocab
        params = lib.llama_context_default_params()
        params.n_ctx, params.n_batch, params.n_ubatch, params.n_seq_max = n_ctx, N_BATCH, N_BATCH, 1
        params.flash_attn_type = lib.LLAMA_FLASH_ATTN_TYPE_DISABLED
        params.n_threads = params.n_threads_batch = 1
        self.ctx = lib.llama_init_from_model(model, params)
        self.batch = lib.llama_batch_init(N_BATCH, 0, 1)
        self.pos = 0

    def eval(self, tokens: list[int], every_row: bool) -> list[np.ndarray]:
        """Append ``tokens`` in one step; the logits rows asked for (every row, or the last)."""
        b = self.batch
        b.n_tokens = len(tokens)
        for i, token in enumerate(tokens):
            b.token[i], b.pos[i], b.n_seq_id[i] = token, self.pos + i, 1
            b.seq_id[i][0] = 0
            b.logits[i] = every_row or i == len(tokens) - 1
        if self.L.llama_decode(self.ctx, b) != 0:
            raise RuntimeError("llama_decode failed")
        self.pos += len(tokens)
        rows = range(len(tokens)) if every_row else [len(tokens) - 1]
        return [np.ctypeslib.as_array(self.L.llama_get_logits_ith(self.ctx, i), shape=(self.n_vocab,)).copy()
                for i in rows]

    def prefill(self, tokens: list[int]) -> np.ndarray:
        row = None
        for start in range(0, len(tokens), N_BATCH):
            row = self.eval(tokens[start:start + N_BATCH], every_row=False)[0]
        return row

    def close(self) -> None:
        self.L.llama_batch_free(self.batch)
        self.L.llama_free(self.ctx)


def lookup_steps(prompt: list[int], answer: list[int], draft: int, ngram: int = 3) -> int:
    """Verification steps a prompt-lookup greedy decoder would take to produce ``answer``: per
    step, the drafted continuation of the last ``ngram`` tokens' latest earlier occurrence (up to
    ``draft`` tokens), kept up to the first token the answer does not have, plus one token of the
    model's own."""
    steps, done = 0, 0
    while done < len(answer):
        text = prompt + answer[:done]
        tail, proposal = text[-ngram:], []
        for start in range(len(text) - ngram - 1, -1, -1):
            if text[start:start + ngram] == tail:
                proposal = text[start + ngram:start + ngram + draft]
                break
        kept = 0
        while kept < len(proposal) and done + kept < len(answer) and proposal[kept] == answer[done + kept]:
            kept += 1
        done += kept + 1
        steps += 1
    return steps


def check(lib, path: Path, repack: bool, prompts: list[list[int]], tokens: int, chunks: list[int],
          n_ctx: int) -> dict:
    params = lib.llama_model_default_params()
    params.use_extra_bufts = repack
    model = lib.llama_model_load_from_file(str(path).encode(), params)
    n_vocab = lib.llama_vocab_n_tokens(lib.llama_model_get_vocab(model))
    rows, answers = [], []
    try:
        for p, prompt in enumerate(prompts):
            ctx = Context(lib, model, n_vocab, n_ctx)
            reference = [ctx.prefill(prompt)]
            answer = []
            t0 = time.process_time()
            for _ in range(tokens):
                answer.append(int(np.argmax(reference[-1])))
                reference += ctx.eval([answer[-1]], every_row=False)
            one_s = (time.process_time() - t0) / tokens
            ctx.close()
            answers.append(answer)
            for c in chunks:
                ctx = Context(lib, model, n_vocab, n_ctx)
                got = [ctx.prefill(prompt)]
                t0 = time.process_time()
                for start in range(0, tokens, c):
                    got += ctx.eval(answer[start:start + c], every_row=True)
                chunk_s = (time.process_time() - t0) / tokens
                ctx.close()
                pairs = list(zip(reference, got))
                rows.append({"prompt": p, "chunk": c, "rows": len(pairs),
                             "rows_differing": sum(not np.array_equal(a, b) for a, b in pairs),
                             "argmax_differing": sum(int(np.argmax(a)) != int(np.argmax(b)) for a, b in pairs),
                             "largest_difference": float(max(np.max(np.abs(a - b)) for a, b in pairs)),
                             "one_token_step_cpu_s_per_token": round(one_s, 5),
                             "chunked_cpu_s_per_token": round(chunk_s, 5),
                             "speedup_if_every_draft_kept": round(one_s / chunk_s, 3)})
    finally:
        lib.llama_model_free(model)
    return {"weights": path.name, "repack": repack, "rows": rows,
            "all_rows_identical": all(r["rows_differing"] == 0 for r in rows),
            "argmax_differing": sum(r["argmax_differing"] for r in rows), "answers": answers}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=96)
    ap.add_argument("--chunks", default="2,4,8,16")
    ap.add_argument("--draft", type=int, default=8)
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results"
                    / f"bench_lookahead-{date.today().isoformat()}.json")
    args = ap.parse_args()
    import llama_cpp

    from ragleak.rag.exact_q8 import exact_copy
    from ragleak.rag.generator import LlamaCppGenerator
    from ragleak.rag.multiseq import logits_match

    generator = LlamaCppGenerator(args.model, n_threads=1)
    _, messages = rag_prompts(args.n, 0)
    prompts = [generator.tokenize(generator.render(m)) for m in messages]
    chunks = [int(c) for c in args.chunks.split(",")]
    llama_cpp.llama_backend_init()
    copy, verdict = exact_copy(generator.path, partial(logits_match, n_threads=1))
    checks = []
    for path in dict.fromkeys([generator.path, copy]):
        for repack in (True, False):
            checks.append(check(llama_cpp, Path(path), repack, prompts, args.tokens, chunks, generator.n_ctx))
            print(json.dumps({k: v for k, v in checks[-1].items() if k not in ("rows", "answers")}), flush=True)
    answers = checks[0].pop("answers")
    for c in checks[1:]:
        c.pop("answers")
    steps = [lookup_steps(p, a, args.draft) for p, a in zip(prompts, answers)]
    report = {
        "machine": {"python": platform.python_version(), "cpu": platform.processor() or platform.machine(),
                    "llama_cpp": llama_cpp.__version__, "system_info": llama_cpp.llama_print_system_info().decode()},
        "model": args.model, "prompts": len(prompts), "prompt_tokens": [len(p) for p in prompts],
        "tokens": args.tokens, "exact_copy": str(verdict),
        "checks": checks,
        "prompt_lookup": {"draft": args.draft, "ngram": 3, "tokens": [len(a) for a in answers], "verify_steps": steps,
                          "tokens_per_step": round(sum(len(a) for a in answers) / sum(steps), 3)},
        "exact_anywhere": any(c["all_rows_identical"] for c in checks),
        "median_speedup_if_every_draft_kept": {
            str(c): statistics.median(r["speedup_if_every_draft_kept"] for r in checks[0]["rows"] if r["chunk"] == c)
            for c in chunks},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in report.items() if k not in ("checks", "machine")}, indent=2))


if __name__ == "__main__":
    main()
