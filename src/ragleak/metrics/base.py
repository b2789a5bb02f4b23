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
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

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

    def applies_to(self, transcript: "Transcript") -> bool:
        """Whether ``transcript`` carries what this metric reads (default: any answered query)."""
        return True

    @abstractmethod
    def compute(self, transcript: "Transcript", context: MetricContext) -> MetricResult:
        """This metric's reading on ``transcript`` (answered queries only; see MetricResult)."""

    @classmethod
    def describe(cls) -> dict[str, Any]:
        return {"name": cls.name, "title": cls.title, "unit": cls.unit, "channels": sorted(cls.channels),
                "higher_is_leakier": cls.higher_is_leakier, "inputs": list(cls.inputs)}


def split_key(key: str) -> tuple[str, str | None]:
    """``"nel_strict[EMAIL_REAL]"`` -> ``("nel_strict", "EMAIL_REAL")``; a plain name -> ``(name, None)``."""
    if key.endswith("]") and "[" in key:
        name, _, part = key[:-1].partition("[")
        return name, part
    return key, None


def failed_queries(transcript: "Transcript") -> int:
    """Queries of ``transcript`` that failed: left out of every metric, and counted in its result."""
    return len(transcript.queries) - len(transcript.answered)
