"""The Metric contract: what a metric observes, what it reads, and the one way it is computed.

Every number in a cell record, ``summary.json``, the report, ``diff``, SARIF and JUnit comes from
``Metric.compute(transcript, context) -> MetricResult``. Metrics are declared, not discovered:

* ``name``, ``title`` (a column heading), ``unit`` (what the value counts or measures);
* ``channels`` (a subset of ``retrieval``, ``context``, ``output``): the audit reads a metric on a
  defense only where one of its active hooks reaches one of these channels;
* ``higher_is_leakier``: the direction a defense should push it;
* ``applies_to(transcript)``: whether the transcript carries what the metric reads (MI scores,
  canary secrets, sentence labels ...). The grid computes every registered metric that applies.

A ``MetricResult`` says what it rests on: ``n`` (and ``n_of``, what is counted: answered queries,
candidates, sentences), an ``interval`` where one is defined, and ``value`` None with a ``note``
when the data cannot support a value (too few answered queries, one class only). A failed query
is never a zero: metrics read answered queries only, and the result counts the failures it left out.
``parts`` holds named sub-readings (NELstrict by class, MI AUC by scorer); a part's key in a cell
record is ``"<metric>[<part>]"``.

A scorer never shares a detector with what it judges: a metric that finds PII with the masker's own
pattern cannot see what the masker misses. So a metric declares the ``detectors`` it runs
(``nlp.recognizers`` names, models, lexicons; per part where a part rests on fewer, in
``part_detectors``), as a defense does, and ``compute_metrics`` marks each reading on a cell whose
defense shares one of them: ``independent`` False, ``shared_detectors`` naming them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Iterable, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from ragleak.attacks.base import Transcript
    from ragleak.records import Passage
    from ragleak.stack import Stack

Channel = Literal["retrieval", "context", "output"]
CHANNELS: tuple[Channel, ...] = ("retrieval", "context", "output")


class MetricResult(BaseModel):
    """One metric's reading on one transcript."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    value: float | None = Field(description="None: undefined on this data (see note)")
    n: int = Field(ge=0, description="how many units the value rests on")
    n_of: str = Field(description="what n counts, e.g. 'answered queries', 'candidates', 'sentences'")
    failed: int = Field(default=0, ge=0, description="queries that failed and were left out (never scored)")
    interval: tuple[float, float] | None = None
    interval_over: str | None = Field(default=None, description="the resampling unit of the interval")
    note: str | None = None
    details: dict[str, Any] = Field(default_factory=dict)
    parts: dict[str, "MetricResult"] = Field(default_factory=dict)
    independent: bool | None = Field(default=None, description=(
        "whether the detectors this reading rests on are all different from the judged defense's; None: the "
        "metric runs no detector, or the transcript does not name a registered defense"))
    shared_detectors: tuple[str, ...] = Field(default=(), description="the detectors it shares with that defense")

    @property
    def defined(self) -> bool:
        return self.value is not None


@dataclass
class MetricContext:
    """What a metric may read besides the transcript: the passages the target indexed (ground
    truth for extraction metrics), the run's stack (an embedder for similarity metrics) and a seed
    for resampling."""

    passages: list["Passage"] = field(default_factory=list)
    stack: "Stack | None" = None
    seed: int = 0


class Metric(ABC):
    """Base class of the registered metrics."""

    name: ClassVar[str]
    title: ClassVar[str]
    unit: ClassVar[str]
    channels: ClassVar[frozenset[Channel]]
    inputs: ClassVar[tuple[str, ...]]
    #: Bumped (on the subclass) whenever the metric's behaviour changes: grid cell ids cover it.
    version: ClassVar[str] = "1"
    #: True when a larger value means more leakage (the direction a defense should push it down).
    higher_is_leakier: ClassVar[bool] = True
    #: True when ``compute`` needs ``context.stack`` (an embedder): computed only where a stack is present.
    requires_stack: ClassVar[bool] = False
    #: The detectors this metric finds what it counts with (``nlp.recognizers`` names, and the models
    #: and lexicons it runs); empty: it runs none (it compares text, reads scores or secrets).
    detectors: ClassVar[frozenset[str]] = frozenset()
    #: The detectors a part rests on where fewer than ``detectors`` (a part not listed rests on all).
    part_detectors: ClassVar[Mapping[str, frozenset[str]]] = {}

    @classmethod
    def detectors_of(cls, part: str | None = None) -> frozenset[str]:
        """The detectors the headline (``part`` None) or one part rests on."""
        return cls.part_detectors.get(part, cls.detectors) if part is not None else cls.detectors

    @classmethod
    def shared_with(cls, defense_detectors: Iterable[str], part: str | None = None) -> frozenset[str]:
        """The detectors the headline or ``part`` shares with a defense that runs ``defense_detectors``."""
        return cls.detectors_of(part) & frozenset(defense_detectors)

    def applies_to(self, transcript: "Transcript") -> bool:
        """Whether ``transcript`` carries what this metric reads (default: any answered query)."""
        return True

    @abstractmethod
    def compute(self, transcript: "Transcript", context: MetricContext) -> MetricResult:
        """This metric's reading on ``transcript`` (answered queries only; see MetricResult)."""

    @classmethod
    def describe(cls) -> dict[str, Any]:
        return {"name": cls.name, "title": cls.title, "unit": cls.unit, "channels": sorted(cls.channels),
                "higher_is_leakier": cls.higher_is_leakier, "inputs": list(cls.inputs),
                "detectors": sorted(cls.detectors)}


def split_key(key: str) -> tuple[str, str | None]:
    """``"nel_strict[EMAIL_REAL]"`` -> ``("nel_strict", "EMAIL_REAL")``; a plain name -> ``(name, None)``."""
    if key.endswith("]") and "[" in key:
        name, _, part = key[:-1].partition("[")
        return name, part
    return key, None


def failed_queries(transcript: "Transcript") -> int:
    """Queries of ``transcript`` that failed: left out of every metric, and counted in its result."""
    return len(transcript.queries) - len(transcript.answered)
