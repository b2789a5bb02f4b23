"""Metrics over transcripts; each declares the channel it observes.

``METRICS`` maps a metric name to its class (lazily imported); every class declares ``name``,
``channels`` and ``inputs`` (see ``metrics.base``). ``metric_channels`` is what the audit's
interpretable rule reads.
"""

from ragleak.metrics.base import CHANNELS, Channel, Metric
from ragleak.registry import Registry

METRICS: Registry[type[Metric]] = Registry(
    "metrics",
    {
        "nel_strict": "ragleak.metrics.nel:NELStrict",
        "nel_loose": "ragleak.metrics.nel:NELLoose",
        "mi_auc": "ragleak.metrics.membership:MembershipAUC",
        "canary_recovery": "ragleak.metrics.canary:CanaryRecovery",
        "verbatim_leaks": "ragleak.metrics.extraction:VerbatimLeaks",
        "rougeL_max": "ragleak.metrics.extraction:RougeLExtraction",
        "embedding_similarity": "ragleak.metrics.extraction:EmbeddingSimilarity",
        "recovered_chunk_rate": "ragleak.metrics.extraction:RecoveredChunkRate",
        "attribution_esr": "ragleak.metrics.attribution:AttributionESR",
        "attribution_f1": "ragleak.metrics.attribution:AttributionF1",
        "attribution_auc": "ragleak.metrics.attribution:AttributionAUC",
    },
)


def metric_channels(name: str) -> frozenset[Channel]:
    """The channels the registered metric ``name`` observes."""
    return METRICS.get(name).channels


__all__ = ["CHANNELS", "Channel", "METRICS", "Metric", "metric_channels"]
