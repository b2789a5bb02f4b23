"""Metrics over transcripts; each declares the channel it observes.

``METRICS`` maps a metric name to its class (lazily imported); every class declares ``name``,
``title``, ``unit``, ``channels`` and ``inputs`` (see ``metrics.base``); ``metrics.compute`` runs
them over a transcript. ``metric_channels`` is what the audit's interpretable rule reads, and
``metric_info`` is what tables and the report title a column with; both take a cell-record key
(``"nel_strict[EMAIL_REAL]"`` reads the metadata of ``nel_strict``).
"""

from typing import Any

from ragleak.metrics.base import CHANNELS, Channel, Metric, MetricContext, MetricResult, split_key
from ragleak.registry import Registry

METRICS: Registry[type[Metric]] = Registry(
    "metrics",
    {
        "nel_strict": "ragleak.metrics.nel:NELStrict",
        "nel_loose": "ragleak.metrics.nel:NELLoose",
        "mi_auc": "ragleak.metrics.membership:MembershipAUC",
        "canary_recovery": "ragleak.metrics.canary:CanaryRecovery",
        "verbatim_leaks": "ragleak.metrics.extraction:VerbatimLeaks",
        "pii_leaks": "ragleak.metrics.pii:PIILeaks",
        "rougeL_max": "ragleak.metrics.extraction:RougeLExtraction",
        "embedding_similarity": "ragleak.metrics.extraction:EmbeddingSimilarity",
        "recovered_chunk_rate": "ragleak.metrics.extraction:RecoveredChunkRate",
        "retrieved_chunk_leak": "ragleak.metrics.retrieved_leak:RetrievedChunkLeak",
        "attribution_esr": "ragleak.metrics.attribution:AttributionESR",
        "attribution_f1": "ragleak.metrics.attribution:AttributionF1",
        "attribution_auc": "ragleak.metrics.attribution:AttributionAUC",
        "utility_f1": "ragleak.metrics.utility:AnswerF1",
        "utility_em": "ragleak.metrics.utility:AnswerEM",
    },
)


def metric_channels(key: str) -> frozenset[Channel]:
    """The channels the registered metric behind ``key`` (a name or ``name[part]``) observes."""
    return METRICS.get(split_key(key)[0]).channels


def metric_info(key: str) -> dict[str, Any]:
    """The registry's metadata for a cell-record key: ``describe()`` of its metric, with ``key``,
    ``part`` and a ``title`` naming the part (``"NEL strict [EMAIL_REAL]"``)."""
    name, part = split_key(key)
    cls = METRICS.get(name)
    info = cls.describe()
    return {**info, "key": key, "part": part, "title": info["title"] + (f" [{part}]" if part else ""),
            "detectors": sorted(cls.detectors_of(part))}


def metric_title(key: str) -> str:
    """A column title for ``key``; a key no registered metric knows keeps its own name."""
    name, _ = split_key(key)
    return metric_info(key)["title"] if name in METRICS.names() else key


__all__ = ["CHANNELS", "Channel", "METRICS", "Metric", "MetricContext", "MetricResult", "metric_channels",
           "metric_info", "metric_title", "split_key"]
