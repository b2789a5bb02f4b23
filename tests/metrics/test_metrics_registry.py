"""Contract test over every registered metric: declared name, channels and inputs."""

from __future__ import annotations

import pytest

from ragleak.metrics import CHANNELS, METRICS, Metric, metric_channels, metric_info


@pytest.mark.parametrize("name", METRICS.names())
def test_metric_declares_name_channels_inputs(name):
    cls = METRICS.get(name)
    assert issubclass(cls, Metric) and cls.name == name
    assert cls.channels and set(cls.channels) <= set(CHANNELS)
    assert cls.inputs and all(isinstance(i, str) for i in cls.inputs)
    assert cls.compute is not Metric.compute  # the one entry point the grid and the report use
    assert isinstance(cls.title, str) and cls.title and isinstance(cls.unit, str) and cls.unit
    assert isinstance(cls.higher_is_leakier, bool)
    assert metric_channels(name) == cls.channels == metric_channels(f"{name}[part]")
    info = metric_info(f"{name}[x]")
    assert info["name"] == name and info["part"] == "x" and info["title"].endswith("[x]")


def test_the_issue_metrics_are_registered():
    assert {"nel_strict", "nel_loose", "mi_auc", "canary_recovery", "rougeL_max", "embedding_similarity",
            "recovered_chunk_rate", "verbatim_leaks", "attribution_esr", "attribution_f1",
            "attribution_auc"} <= set(METRICS.names())
