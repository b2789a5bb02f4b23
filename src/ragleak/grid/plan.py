"""The dry-run plan of a grid: its cells, the distinct generation streams they need, the model
calls those streams make, and an ETA from this machine's measured token rates.

A *generation stream* is the sequence of generations one cell makes; cells with the same stream
share every generation through the run's cache, so only the first pays. Two cells have the same
stream when they send the same queries through the same generation path:

* same attack (and parameters), corpus, seed, budget and stack; the mode too, where the grid's
  mode reaches the attack's queries (PM runs its own conversations, so its mode axis is inert);
* the same defense, parameters and *applied* epsilon (an epsilon the defense ignores is inert);
  or, for a defense that acts only after generation (``postprocess``), the baseline's stream -
  but only when the attack's queries are fixed in advance and no prompt carries an earlier
  answer (``Attack.stream_shape``): an adaptive attack or a conversation sees the defended
  answers, so its later prompts differ from the baseline's.

Estimates, stated as such: queries per cell are the budget (or the attack's default for the
cell's corpus); model calls are the target's plain generations, the attack's own calls per query
(``StreamShape.attacker_calls_per_query``) and the audit's reference generations under the run's
``--audit`` policy; a voting defense decodes ``Defense.generation_cost()`` sequences per query.
The ETA prices every generation at the stack's prompt length and at ``max_tokens`` of decoding
(an upper bound: answers often stop earlier), at the rates ``ragleak models --bench`` measured.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from ragleak.attacks import ATTACKS
from ragleak.attacks.base import Attack, StreamShape
from ragleak.corpora import load_corpus
from ragleak.defenses import defense_class
from ragleak.errors import RagleakError
from ragleak.grid.spec import CellSpec, GridConfig
from ragleak.rag.speed import stored_speed

log = logging.getLogger(__name__)

TOKENS_PER_WORD = 1.35  # English words to Qwen/SmolLM tokens, measured on the built-in corpora
PROMPT_OVERHEAD_TOKENS = 100  # system prompt, template and the query


def stream_kind(shape: StreamShape) -> str:
    return f"{'adaptive' if shape.adaptive else 'fixed'}/{'multi' if shape.carries_answers else 'single'}"


def stream_key(cell: CellSpec, shape: StreamShape) -> tuple:
    """What a cell's generations depend on (see the module docstring)."""
    hooks = set(defense_class(cell.defense).hooks)
    shares_baseline = hooks <= {"postprocess"} and not shape.adaptive and not shape.carries_answers
    path: Any = "baseline" if shares_baseline else (
        cell.defense, repr(sorted(cell.defense_params.items())), cell.applied_epsilon)
    return (cell.attack, repr(cell.attack_params), cell.corpus, repr(cell.corpus_params),
            cell.mode if shape.mode_matters else "-", cell.seed, cell.budget, repr(cell.stack),
            repr(getattr(cell, "target", None)), path)


class _Queries:
    """Queries per cell: its budget, or the attack's default for the cell's corpus (memoised)."""

    def __init__(self) -> None:
        self._memo: dict[tuple, int] = {}

    def __call__(self, cell: CellSpec, attack: Attack) -> int:
        if cell.budget is not None:
            return cell.budget
        key = (cell.attack, repr(cell.attack_params), cell.corpus, repr(cell.corpus_params), cell.seed)
        if key not in self._memo:
            try:
                _, view = attack.prepare_corpus(load_corpus(cell.corpus, **cell.corpus_params), cell.seed)
                self._memo[key] = attack.budget_for(view)
            except RagleakError as exc:  # the cell itself will record the error; plan it at the default
                log.info("plan: %s: %s; counting its default budget", cell.label, exc)
                self._memo[key] = attack.default_budget
        return self._memo[key]


@dataclass(frozen=True)
class CellEstimate:
    """A cell's generation stream and what the stream costs when it runs first (its twins then
    find every generation in the cache)."""

    cell: CellSpec
    key: tuple
    kind: str
    queries: int
    model_calls: float
    generations: float  # plain generations' worth of decoding


class Estimator:
    """``CellEstimate`` of each cell of a grid run under ``audit`` (``GridConfig.audit``, fraction)."""

    def __init__(self, audit: str = "sample", audit_fraction: float = 0.1) -> None:
        self.references = {"all": 1.0, "sample": audit_fraction, "off": 0.0}[audit]
        self._queries = _Queries()

    def __call__(self, cell: CellSpec) -> CellEstimate:
        attack = ATTACKS.get(cell.attack)(**cell.attack_params)
        shape = attack.stream_shape(cell.mode)
        defense = defense_class(cell.defense)(**cell.defense_kwargs())
        queries = self._queries(cell, attack)
        own = defense.overrides("generate")
        calls = queries * ((self.references if own else 1.0) + shape.attacker_calls_per_query)
        work = calls + (queries * defense.generation_cost() if own else 0.0)
        return CellEstimate(cell, stream_key(cell, shape), stream_kind(shape), queries, calls, work)


def plan_summary(config: GridConfig, cells: list[CellSpec] | None = None) -> dict:
    """What a dry run prints: the cells; the distinct generation streams, overall and per attack
    kind (adaptive or fixed queries, single prompts or prompts carrying answers); the model calls
    and generation work of those streams; and an ETA where this machine's rates are known."""
    cells = config.expand() if cells is None else cells
    estimate = Estimator(config.audit, config.audit_fraction)
    streams: dict[tuple, CellEstimate] = {}
    kinds: dict[str, dict[str, int]] = defaultdict(lambda: {"cells": 0, "streams": 0})
    for cell in cells:
        e = estimate(cell)
        kinds[e.kind]["cells"] += 1
        if e.key not in streams:
            kinds[e.kind]["streams"] += 1
            streams[e.key] = e
    eta, basis = _eta(list(streams.values()))
    return {
        "cells": len(cells), "distinct_generation_streams": len(streams),
        "shared_by_cache": len(cells) - len(streams),
        "by_kind": {k: dict(v) for k, v in sorted(kinds.items())},
        "queries": sum(s.queries for s in streams.values()),
        "model_calls": round(sum(s.model_calls for s in streams.values())),
        "generations": round(sum(s.generations for s in streams.values())),
        "audit": {"mode": config.audit, "fraction": config.audit_fraction},
        "eta_s": eta, "eta_basis": basis,
        "plan": [c.label for c in cells],
    }


def _eta(streams: list[CellEstimate]) -> tuple[float | None, dict]:
    """Seconds on one worker for ``streams`` at the stored rates of their models, or None (with
    the models that have no measurement)."""
    total, missing, rates = 0.0, set(), {}
    for s in streams:
        stack = s.cell.stack
        threads = stack.n_threads or 1
        speed = stored_speed(stack.model, threads)
        if speed is None:
            missing.add(stack.model)
            continue
        rates[f"{stack.model}@{threads}"] = {k: speed[k] for k in ("prefill_tok_s", "decode_tok_s", "measured_at")
                                             if k in speed}
        prompt = TOKENS_PER_WORD * stack.top_k * stack.chunk_words + PROMPT_OVERHEAD_TOKENS
        per_generation = prompt / speed["prefill_tok_s"] + stack.decoding.max_tokens / speed["decode_tok_s"]
        total += s.generations * per_generation
    basis = {"rates": rates, "assumes": "each generation: the stack's full prompt, max_tokens decoded (upper bound)"}
    if missing:
        basis["missing"] = sorted(missing)
        basis["hint"] = "measure this machine's rates with `ragleak models --bench` (threads 1 for grid workers)"
        return None, basis
    return round(total), basis
