"""The Metric base class: what a metric observes (its channels) and what it reads (its inputs).

Metrics are declared, not discovered: each class states ``name``, ``channels`` (a subset of
``retrieval``, ``context``, ``output``) and ``inputs`` (the fields of a run it reads), and the
audit uses the channels to decide whether a reading on a defense is interpretable.
"""

from __future__ import annotations

from typing import ClassVar, Literal

Channel = Literal["retrieval", "context", "output"]
CHANNELS: tuple[Channel, ...] = ("retrieval", "context", "output")


class Metric:
    """Base class of the registered metrics; subclasses implement ``compute``."""

    name: ClassVar[str]
    channels: ClassVar[frozenset[Channel]]
    inputs: ClassVar[tuple[str, ...]]
    #: True when a larger value means more leakage (the direction a defense should push it down).
    higher_is_leakier: ClassVar[bool] = True
