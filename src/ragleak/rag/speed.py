"""Measure a model's prefill and decode speed on this machine (``ragleak models --bench``) and keep
the last measurement per model and thread count in ``RAGLEAK_HOME/speed.json``, where the grid's
ETA (``grid.eta``) reads it."""

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


def measure_speed(model: str, n_threads: int | None = None, decode_tokens: int = 64, repeats: int = 3) -> dict:
    """Prefill tok/s on a ~300-token RAG-like prompt, decode tok/s over ``decode_tokens`` forced
    tokens, each the median of ``repeats`` timings (one timing of a 2-second prefill was seen 15%
    off the next, and an ETA scales with it; the range is kept beside the median). About 25 s.

    Decoding uses ``max_tokens`` with the end-of-turn stop disabled by asking for a long answer;
    the reported rate divides by the tokens actually produced.
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
    }


def speed_file() -> Path:
    return ragleak_home() / "speed.json"


def _stored() -> dict:
    try:
        data = json.loads(speed_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def save_speed(model: str, measured: dict) -> None:
    """Keep ``measured`` (a ``measure_speed`` result) as this machine's rate for ``model``."""
    data = _stored()
    stamped = {**measured, "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    data.setdefault(model, {})[str(measured["threads"])] = stamped
    speed_file().parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(speed_file(), json.dumps(data, indent=2, sort_keys=True))


def stored_speed(model: str, n_threads: int = 1) -> dict | None:
    """The last measured rates of ``model`` at ``n_threads`` on this machine, or None."""
    row = _stored().get(model, {}).get(str(n_threads))
    ok = isinstance(row, dict) and all(isinstance(row.get(k), (int, float)) and row[k] > 0
                                       for k in ("prefill_tok_s", "decode_tok_s"))
    return row if ok else None


def measure_missing(models: set[tuple[str, int]], announce=None) -> dict[str, str]:
    """Measure and keep the rates of every installed ``(model, threads)`` with no stored
    measurement (a dry run's ETA needs them; about 25 s each on the default model). Returns what
    was left unmeasured and why (not installed)."""
    from ragleak.rag.models import MODELS, is_installed

    skipped = {}
    for model, threads in sorted(models):
        if stored_speed(model, threads) is not None:
            continue
        spec = MODELS.get(model)
        if spec is None or not is_installed(spec):
            skipped[model] = "not installed"
            continue
        if announce is not None:
            announce(model, threads)
        save_speed(model, measure_speed(model, threads))
    return skipped
