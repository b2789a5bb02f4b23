"""Stored rates: kept per model and thread count, read back only when whole; measured once for a
dry run that lacks them; a measurement is the median of its repeated timings."""

from __future__ import annotations

import pytest

from ragleak.rag import speed
from ragleak.rag.speed import measure_speed, save_speed, stored_speed


def test_rates_are_kept_per_model_and_thread_count_and_a_broken_row_is_none(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGLEAK_HOME", str(tmp_path))
    assert stored_speed("m", 1) is None
    save_speed("m", {"threads": 1, "prefill_tok_s": 100.0, "decode_tok_s": 20.0})
    save_speed("m", {"threads": 2, "prefill_tok_s": 150.0, "decode_tok_s": 30.0})
    assert stored_speed("m", 1)["decode_tok_s"] == 20.0 and stored_speed("m", 2)["prefill_tok_s"] == 150.0
    assert "measured_at" in stored_speed("m", 1) and stored_speed("m", 4) is None
    save_speed("m", {"threads": 1, "prefill_tok_s": 0.0, "decode_tok_s": 20.0})  # no usable rate
    assert stored_speed("m", 1) is None


def test_a_dry_run_measures_an_installed_model_without_stored_rates_once(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGLEAK_HOME", str(tmp_path))
    measured = []

    def fake_measure(model, n_threads=None, decode_tokens=64):
        measured.append((model, n_threads))
        return {"threads": n_threads, "prefill_tok_s": 50.0, "decode_tok_s": 5.0, "load_1m": 0.5}

    monkeypatch.setattr(speed, "measure_speed", fake_measure)
    monkeypatch.setattr("ragleak.rag.models.is_installed", lambda spec: spec.name == "smollm2-135m")
    skipped = speed.measure_missing({("smollm2-135m", 1), ("qwen2.5-coder-1.5b", 1)})
    assert measured == [("smollm2-135m", 1)] and skipped == {"qwen2.5-coder-1.5b": "not installed"}
    assert speed.stored_speed("smollm2-135m", 1)["decode_tok_s"] == 5.0
    speed.measure_missing({("smollm2-135m", 1)})  # stored now: not measured again
    assert measured == [("smollm2-135m", 1)]


@pytest.mark.model
def test_a_measured_rate_is_the_median_of_its_repeated_timings_with_their_range():
    from ragleak.rag.models import DEFAULT_MODEL

    measured = measure_speed(DEFAULT_MODEL, 1, decode_tokens=16, repeats=3)
    assert measured["repeats"] == 3
    for rate in ("prefill_tok_s", "decode_tok_s"):
        low, high = measured[f"{rate}_range"]
        assert 0 < low <= measured[rate] <= high
