"""The one path from a transcript to numbers: every registered metric that applies, computed once.

A cell record, ``summary.json``, the report, ``diff``, SARIF and JUnit all read what
``compute_metrics`` returns. Parts are flattened: ``nel_strict`` and ``nel_strict[EMAIL_REAL]``
are two keys of the result, each a ``MetricResult`` (the headline keeps no parts of its own).

Each reading of a metric that runs detectors says whether they are independent of the defense
the transcript ran under (its traces name it): ``independent`` and ``shared_detectors``.

A benign probe's transcript (``attacks.utility``: its ``scoring`` carries gold answers) is read by
the metrics that read gold answers (``metrics.utility``) and by no leakage metric.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ragleak.defenses import DEFENSES
from ragleak.metrics import METRICS
from ragleak.metrics.base import Metric, MetricContext, MetricResult
from ragleak.metrics.utility import GOLD, GOLD_INPUT

if TYPE_CHECKING:
    from ragleak.attacks.base import Transcript


def part_key(name: str, part: str) -> str:
    """The cell-record key of a metric's part (inverse of ``base.split_key``)."""
    return f"{name}[{part}]"


def compute_metrics(transcript: "Transcript", context: MetricContext) -> dict[str, MetricResult]:
    """``{key: MetricResult}`` for every registered metric that ``applies`` to the transcript."""
    out: dict[str, MetricResult] = {}
    defense = judged_detectors(transcript)
    for name in METRICS.names():
        metric = METRICS.get(name)()
        if not applies(metric, transcript, context):
            continue
        out.update(judged(type(metric), name, metric.compute(transcript, context), defense))
    return out


def applies(metric: Metric, transcript: "Transcript", context: MetricContext) -> bool:
    """Whether ``compute_metrics`` computes ``metric`` on ``transcript``: its ``applies_to`` holds,
    its stack is there where it needs one, and it reads gold answers exactly when the transcript is a
    benign probe's (a probe's answers are the service doing its job, not leakage: no leakage metric
    reads them, and the utility metrics read nothing else; ``attacks.utility``)."""
    if metric.requires_stack and context.stack is None or not metric.applies_to(transcript):
        return False
    return (GOLD_INPUT in metric.inputs) == (GOLD in transcript.scoring)


def judged_detectors(transcript: "Transcript") -> frozenset[str] | None:
    """The detectors of the one registered defense the transcript's traces name; None when they
    name none (an endpoint target), several, or one the registry does not know."""
    names = {q.trace.defense for q in transcript.queries if q.trace is not None}
    if len(names) != 1 or (name := next(iter(names))) not in DEFENSES.names():
        return None
    return DEFENSES.get(name).detectors


def judged(metric: type[Metric], name: str, result: MetricResult,
           defense: frozenset[str] | None) -> dict[str, MetricResult]:
    """``result`` flattened (the headline under ``name``, each part under ``part_key``), each reading
    marked independent of the defense's detectors ``defense`` or not (unmarked where it runs no
    detector or the defense is not known)."""
    readings = {None: result.model_copy(update={"parts": {}}), **result.parts}
    out: dict[str, MetricResult] = {}
    for part, reading in readings.items():
        if defense is not None and metric.detectors_of(part):
            shared = tuple(sorted(metric.shared_with(defense, part)))
            reading = reading.model_copy(update={"independent": not shared, "shared_detectors": shared})
        out[name if part is None else part_key(name, part)] = reading
    return out
