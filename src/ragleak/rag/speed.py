"""Measure a model's prefill and decode speed on this machine (for `ragleak models --bench`), and
keep the last measurement per model and thread count in ``RAGLEAK_HOME/speed.json``, where the
grid's dry-run reads it for its ETA.

A grid on W workers runs W models at once, which share the memory bus and caches: each runs
slower than one alone. So the rates a W-worker ETA uses are measured the same way, W copies at
once (``measure_concurrent``: each copy loads and warms up, then all time the same work together),
and kept beside the one-copy rates (key ``"1x2"``: one thread, two copies).

A voting defense decodes its n prompts in lock-step, one ``llama_decode`` of n tokens per step,
which reads the weights once for all n but runs llama.cpp's several-column kernels: its cost is
not n one-sequence steps, and not one (measured here, 2026-12-06, Qwen2.5-Coder-0.5B on one
thread: 8 sequences about 5.4 one-sequence steps, 4 about 3.3, 2 about 2.5). So the measurement
also times lock-step steps of 1, 2, 4 and 8 sequences (``measure_lockstep``) and keeps their cost
relative to one sequence's step (``lockstep_ratio``), which the ETA prices voting answers at.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from datetime import datetime, timezone
from pathlib import Path

from ragleak.files import atomic_write_text, ragleak_home

from ragleak.rag.generator import DecodingParams, LlamaCppGenerator
from ragleak.rag.prompt import ChatMessage

_PASSAGE = (
    "The Riverside Clinic opened in 2011 and is located at 42 Elm Street. It specializes in pediatric care "
    "and employs twelve full-time nurses. The clinic's director previously worked at St. Mary's Hospital. "
)


def measure_speed(model: str, n_threads: int | None = None, decode_tokens: int = 64, barrier=None,
                  repeats: int = 3) -> dict:
    """Prefill tok/s on a ~300-token RAG-like prompt, decode tok/s over ``decode_tokens`` forced
    tokens, each the median of ``repeats`` timings (one timing of a 2-second prefill was seen 15%
    off the next, and an ETA scales with it; the range is kept beside the median), and the
    lock-step step costs (``measure_lockstep``, ~10 s). About 35 s in all.

    Decoding uses ``max_tokens`` with the end-of-turn stop disabled by asking for a long answer;
    the reported rate divides by the tokens actually produced. ``barrier``: waited on after the
    warm-up, so that concurrent copies time the same work together.
    """
    gen = LlamaCppGenerator(model, n_threads=n_threads, params=DecodingParams(max_tokens=decode_tokens))
    t0 = time.perf_counter()
    gen.prepare()
    load_s = time.perf_counter() - t0
    prompt = gen.render([
        ChatMessage(role="system", content="You are a helpful assistant."),
        ChatMessage(role="user", content=f"Context:\n{_PASSAGE * 6}\n\nWrite a long, detailed essay about the clinic."),
    ])
    n_prompt = len(gen.tokenize(prompt))
    gen.complete(prompt, DecodingParams(max_tokens=1))  # warm-up: first call in a process is slow
    if barrier is not None:
        barrier.wait()
    prefill, totals, decoded = [], [], 0
    for _ in range(max(repeats, 1)):
        t0 = time.perf_counter()
        gen.complete(prompt, DecodingParams(max_tokens=1))
        prefill.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        decoded = gen.complete(prompt, DecodingParams(max_tokens=decode_tokens)).completion_tokens
        totals.append(time.perf_counter() - t0)
    prefill_s = statistics.median(prefill)
    prefill_rates = [n_prompt / t for t in prefill]
    decode_rates = [max(decoded - 1, 1) / max(t - prefill_s, 1e-9) for t in totals]
    lockstep = measure_lockstep(gen.path, gen.n_threads)
    return {
        "threads": gen.n_threads,
        # rates fall 2-15x while other processes hold the cores: the reader of an ETA needs to know
        "load_1m": round(os.getloadavg()[0], 2),
        "load_s": round(load_s, 2),
        "prompt_tokens": n_prompt,
        "repeats": len(prefill),
        "prefill_tok_s": round(statistics.median(prefill_rates), 1),
        "prefill_tok_s_range": [round(min(prefill_rates), 1), round(max(prefill_rates), 1)],
        "decode_tokens": decoded,
        "decode_tok_s": round(statistics.median(decode_rates), 1),
        "decode_tok_s_range": [round(min(decode_rates), 1), round(max(decode_rates), 1)],
        "lockstep_ratio": lockstep,
    }


LOCKSTEP_SIZES = (2, 4, 8)


def measure_lockstep(model_path: Path, n_threads: int, sizes=LOCKSTEP_SIZES, steps: int = 12) -> dict[str, float]:
    """The time of a lock-step step of n sequences over a step of one, for each n of ``sizes``,
    in the multi-sequence decoder voting defenses use (``rag.multiseq``, its default weights):
    ``{"2": 1.1, ...}``. Each sequence holds a short RAG-like prompt; every step appends one token
    to every sequence, as a vote does."""
    from ragleak.rag.multiseq import LlamaMultiSequence

    decoder = LlamaMultiSequence(model_path, n_threads)
    try:
        prompt = decoder.tokenize(f"Context: {_PASSAGE}\nQuestion: where is the clinic?\nAnswer:")
        token = decoder.tokenize(" the")[0]

        def step_s(n: int) -> float:
            with decoder.session_of_tokens([prompt] * n, steps + 2) as session:
                session.append(token)  # warm-up step
                t0 = time.perf_counter()
                for _ in range(steps):
                    session.append(token)
                return (time.perf_counter() - t0) / steps

        one = step_s(1)
        return {str(n): round(step_s(n) / one, 3) for n in sizes}
    finally:
        decoder.close()


def _measure_copy(model: str, n_threads: int, barrier, results) -> None:
    try:
        results.put(measure_speed(model, n_threads, barrier=barrier))
    except BaseException as exc:  # the parent reports it; a copy that dies must not hang the others
        barrier.abort()
        results.put({"error": f"{type(exc).__name__}: {exc}"})


def measure_concurrent(model: str, n_threads: int, copies: int, timeout_s: float = 600.0) -> dict:
    """Rates of ``copies`` processes measuring ``model`` at once (each on ``n_threads``): the mean
    of their prefill and decode rates, as a grid's worker sees them beside the others. A copy that
    dies (or a measurement past ``timeout_s``) is an error, never a hang."""
    if copies == 1:
        return measure_speed(model, n_threads)
    import queue
    from multiprocessing import get_context

    ctx = get_context("spawn")
    barrier, results = ctx.Barrier(copies, timeout=timeout_s), ctx.Queue()
    procs = [ctx.Process(target=_measure_copy, args=(model, n_threads, barrier, results)) for _ in range(copies)]
    for proc in procs:
        proc.start()
    try:
        rows = [results.get(timeout=timeout_s) for _ in procs]
    except queue.Empty:
        rows = [{"error": f"no result within {timeout_s:.0f} s (exit codes {[p.exitcode for p in procs]})"}]
    finally:
        for proc in procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
    failed = [r["error"] for r in rows if "error" in r]
    if failed:
        raise RuntimeError(f"measuring {model} in {copies} copies at once failed: {failed[0]}")
    return {**rows[0], "copies": copies,
            "prefill_tok_s": round(sum(r["prefill_tok_s"] for r in rows) / copies, 1),
            "decode_tok_s": round(sum(r["decode_tok_s"] for r in rows) / copies, 1),
            "lockstep_ratio": {n: round(sum(r["lockstep_ratio"][n] for r in rows) / copies, 3)
                               for n in rows[0]["lockstep_ratio"]},
            "per_copy": [{k: r[k] for k in ("prefill_tok_s", "decode_tok_s", "lockstep_ratio")} for r in rows]}


def lockstep_ratio(speed: dict, n: float) -> float | None:
    """A lock-step step of ``n`` sequences over one sequence's step, from ``speed``'s measured
    ``lockstep_ratio`` (linear between the measured sizes and, never falling, beyond the largest; 1
    at n = 1), between 1 and n (n one-sequence steps); None where the rates hold no lock-step
    measurement."""
    measured = speed.get("lockstep_ratio")
    if not isinstance(measured, dict) or not measured:
        return None
    try:
        points = sorted([(1.0, 1.0)] + [(float(k), float(v)) for k, v in measured.items()])
    except (TypeError, ValueError):
        return None
    if n <= 1:
        return max(n, 0.0)
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if n <= x1:
            return _clamped(y1 if n == x1 else y0 + (y1 - y0) * (n - x0) / (x1 - x0), n)
    (x0, y0), (x1, y1) = points[-2], points[-1]
    return _clamped(y1 + max(y1 - y0, 0.0) / (x1 - x0) * (n - x1), n)


def _clamped(ratio: float, n: float) -> float:
    # a step of n sequences costs at least one sequence's step (a measurement below is noise)
    # and at most n of them
    return min(max(ratio, 1.0), n)


def speed_key(n_threads: int, copies: int = 1) -> str:
    """``"1"``: one thread alone; ``"1x2"``: one thread each, two copies at once."""
    return str(n_threads) if copies == 1 else f"{n_threads}x{copies}"


def speed_file() -> Path:
    return ragleak_home() / "speed.json"


def _stored() -> dict:
    try:
        data = json.loads(speed_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def save_speed(model: str, measured: dict) -> None:
    """Keep ``measured`` (a ``measure_speed`` or ``measure_concurrent`` result) as this machine's
    rate for ``model``."""
    data = _stored()
    stamped = {**measured, "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    data.setdefault(model, {})[speed_key(measured["threads"], measured.get("copies", 1))] = stamped
    speed_file().parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(speed_file(), json.dumps(data, indent=2, sort_keys=True))


def stored_speed(model: str, n_threads: int = 1, copies: int = 1) -> dict | None:
    """The last measured rates of ``model`` at ``n_threads`` (``copies`` at once) on this
    machine, or None."""
    row = _stored().get(model, {}).get(speed_key(n_threads, copies))
    ok = isinstance(row, dict) and all(isinstance(row.get(k), (int, float)) and row[k] > 0
                                       for k in ("prefill_tok_s", "decode_tok_s"))
    return row if ok else None


def measure_missing(models: set[tuple[str, int]], announce=None, copies: int = 1) -> dict[str, str]:
    """Measure and keep the rates of every installed ``(model, threads)`` with no stored
    measurement, alone and, for ``copies`` > 1, that many at once (a dry run's ETA needs them;
    about 35 s each on the default model). Returns what was left unmeasured and why (not installed)."""
    from ragleak.rag.models import MODELS, is_installed

    skipped = {}
    for model, threads, n in sorted({(m, t, c) for m, t in models for c in {1, copies}}):
        if stored_speed(model, threads, n) is not None:
            continue
        spec = MODELS.get(model)
        if spec is None or not is_installed(spec):
            skipped[model] = "not installed"
            continue
        if announce is not None:
            announce(model, threads, n)
        save_speed(model, measure_concurrent(model, threads, n))
    return skipped

