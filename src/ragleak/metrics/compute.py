"""The one path from a transcript to numbers: every registered metric that applies, computed once.

A cell record, ``summary.json``, the report, ``diff``, SARIF and JUnit all read what
``compute_metrics`` returns. Parts are flattened: ``nel_strict`` and ``nel_strict[EMAIL_REAL]``
are two keys of the result, each a ``MetricResult`` (the headline keeps no parts of its own).

Each reading of a metric that runs detectors says whether they are independent of the defense
the transcript ran under (its traces name it): ``independent`` and ``shared_detectors``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ragleak.defenses import DEFENSES
from ragleak.metrics import METRICS
from ragleak.metrics.base import Metric, MetricContext, MetricResult

if TYPE_CHECKING:
    from ragleak.attacks.base import Transcript


def part_key(name: str, part: str) -> str:
    """The cell-record key of a metric's part (inverse of ``base.split_key``)."""
    return f"{name}[{part}]"


def compute_metrics(transcript: "Transcript", context: MetricContext) -> dict[str, MetricResult]:
    """``{key: MetricResult}`` for every registered metric whose ``applies_to`` holds (and, for a
    metric that ``requires_stack``, only where ``context`` carries one)."""
    out: dict[str, MetricResult] = {}
    defense = judged_detectors(transcript)
    for name in METRICS.names():
        metric = METRICS.get(name)()
        if metric.requires_stack and context.stack is None or not metric.applies_to(transcript):
            continue
        result = metric.compute(transcript, context)
        out[name] = judged(type(metric), None, result.model_copy(update={"parts": {}}), defense)
        for part, sub in result.parts.items():
            out[part_key(name, part)] = judged(type(metric), part, sub, defense)
    return out


def judged_detectors(transcript: "Transcript") -> frozenset[str] | None:
    """The detectors of the one registered defense the transcript's traces name; None when they
    name none (an endpoint target), several, or one the registry does not know."""
    names = {q.trace.defense for q in transcript.queries if q.trace is not None}
    if len(names) != 1 or (name := next(iter(names))) not in DEFENSES.names():
        return None
    return DEFENSES.get(name).detectors


def judged(metric: type[Metric], part: str | None, result: MetricResult,
           defense: frozenset[str] | None) -> MetricResult:
    """``result`` marked independent of the defense's detectors ``defense`` or not (unmarked where
    the metric runs no detector or the defense is not known)."""
    if defense is None or not metric.detectors_of(part):
        return result
    shared = tuple(sorted(metric.shared_with(defense, part)))
    return result.model_copy(update={"independent": not shared, "shared_detectors": shared})
