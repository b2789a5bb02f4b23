"""The one path from a transcript to numbers: every registered metric that applies, computed once.

A cell record, ``summary.json``, the report, ``diff``, SARIF and JUnit all read what
``compute_metrics`` returns. Parts are flattened: ``nel_strict`` and ``nel_strict[EMAIL_REAL]``
are two keys of the result, each a ``MetricResult`` (the headline keeps no parts of its own).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ragleak.metrics import METRICS
from ragleak.metrics.base import MetricContext, MetricResult

if TYPE_CHECKING:
    from ragleak.attacks.base import Transcript


def part_key(name: str, part: str) -> str:
    """The cell-record key of a metric's part (inverse of ``base.split_key``)."""
    return f"{name}[{part}]"


def compute_metrics(transcript: "Transcript", context: MetricContext) -> dict[str, MetricResult]:
    """``{key: MetricResult}`` for every registered metric whose ``applies_to`` holds (and, for a
    metric that ``requires_stack``, only where ``context`` carries one)."""
    out: dict[str, MetricResult] = {}
    for name in METRICS.names():
        metric = METRICS.get(name)()
        if metric.requires_stack and context.stack is None or not metric.applies_to(transcript):
            continue
        result = metric.compute(transcript, context)
        out[name] = result.model_copy(update={"parts": {}})
        for part, sub in result.parts.items():
            out[part_key(name, part)] = sub
    return out
