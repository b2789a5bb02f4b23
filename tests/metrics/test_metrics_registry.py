"""Contract test over every registered metric: declared name, channels and inputs."""

from __future__ import annotations

import pytest

from ragleak.metrics import CHANNELS, METRICS, Metric, metric_channels


@pytest.mark.parametrize("name", METRICS.names())
def test_metric_declares_name_channels_inputs(name):
    cls = METRICS.get(name)
    assert issubclass(cls, Metric) and cls.name == name
    assert cls.channels and set(cls.channels) <= set(CHANNELS)
    assert cls.inputs and all(isinstance(i, str) for i in cls.inputs)
    assert callable(getattr(cls, "compute", None))
    assert metric_channels(name) == cls.channels


def test_the_issue_metrics_are_registered():
    assert {"nel_strict", "nel_loose", "mi_auc", "canary_recovery", "rougeL_max", "embedding_similarity",
            "recovered_chunk_rate"} <= set(METRICS.names())
