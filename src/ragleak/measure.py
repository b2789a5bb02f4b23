"""One attack, measured: ``run_attack`` runs an attack against a target and computes every metric
that applies to its transcript, through the one metric path (``metrics.compute.compute_metrics``).

A grid cell, ``ragleak attack`` and ``ragleak score`` all call it. ``score`` hands it a transcript
written earlier instead of an attack: the queries were sent then, and only the measuring is left.
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Sequence

from ragleak.attacks.base import Attack, CorpusView, SessionMode, Transcript
from ragleak.context import RunContext
from ragleak.errors import ConfigError
from ragleak.metrics.base import MetricContext, MetricResult
from ragleak.metrics.compute import compute_metrics
from ragleak.pipeline.target import Target
from ragleak.records import Passage


class AttackRun(NamedTuple):
    """An attack's transcript and its metric results keyed by metric (and part) name."""

    transcript: Transcript
    metrics: dict[str, MetricResult]


def run_attack(attack: Attack | Transcript, target: Target | None, ctx: RunContext, passages: Sequence[Passage] = (),
               *, budget: int | None = None, corpus_view: CorpusView | None = None, mode: SessionMode = "single",
               keep: Callable[[Transcript], None] | None = None) -> AttackRun:
    """Run ``attack`` against ``target`` (``Attack.run`` with ``ctx``, ``budget``, ``corpus_view``
    and ``mode``), then measure the transcript over ``passages``, the passages the target indexed
    (the extraction metrics' ground truth), with ``ctx``'s stack and seed. ``attack`` may be a
    transcript written earlier (``target`` None): it is measured as it stands. ``keep`` gets the
    transcript before it is measured, so a long attack's queries are written even where a metric
    fails."""
    if isinstance(attack, Transcript):
        if target is not None:
            raise ConfigError("a transcript written earlier is measured as it stands: no target is queried")
        transcript = attack
    else:
        if target is None:
            raise ConfigError(f"attack {attack.name!r} needs a target to query")
        transcript = attack.run(target, ctx, budget=budget, corpus_view=corpus_view, mode=mode)
        if keep is not None:
            keep(transcript)
    return AttackRun(transcript, compute_metrics(transcript, MetricContext(list(passages), ctx.stack, ctx.seed)))
