"""Stored rates: one copy and several at once kept apart; a measurement whose copy fails is an
error, not a hang and not a rate."""

from __future__ import annotations

import pytest

from hypothesis import given
from hypothesis import strategies as st

from ragleak.rag.speed import (lockstep_ratio, measure_concurrent, measure_lockstep, measure_speed, save_speed,
                              speed_key, stored_speed)


def test_rates_of_copies_at_once_are_kept_beside_the_rates_of_one(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGLEAK_HOME", str(tmp_path))
    save_speed("m", {"threads": 1, "prefill_tok_s": 100.0, "decode_tok_s": 20.0})
    assert stored_speed("m", 1, 2) is None
    save_speed("m", {"threads": 1, "copies": 2, "prefill_tok_s": 90.0, "decode_tok_s": 18.0})
    assert stored_speed("m", 1)["decode_tok_s"] == 20.0 and stored_speed("m", 1, 2)["decode_tok_s"] == 18.0
    assert (speed_key(1), speed_key(1, 2), speed_key(2, 3)) == ("1", "1x2", "2x3")


def test_a_copy_that_fails_fails_the_measurement(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGLEAK_HOME", str(tmp_path))
    with pytest.raises(RuntimeError, match="2 copies at once failed: .*no-such-model"):
        measure_concurrent("no-such-model", 1, 2, timeout_s=60)


_RATIOS = st.dictionaries(st.sampled_from(["2", "3", "4", "8", "16"]), st.floats(0.5, 20.0), min_size=1)


@given(measured=_RATIOS, n=st.floats(1.0, 64.0))
def test_a_lock_step_ratio_is_one_at_one_sequence_the_measurement_where_measured_and_between_1_and_n(measured, n):
    speed = {"lockstep_ratio": measured}
    assert lockstep_ratio(speed, 1) == 1.0
    assert 1.0 <= lockstep_ratio(speed, n) <= n
    for size, value in measured.items():
        assert lockstep_ratio(speed, float(size)) == pytest.approx(min(max(value, 1.0), float(size)))
    largest = max(measured, key=float)  # beyond the largest measured size it does not fall
    assert lockstep_ratio(speed, float(largest) * 2) >= lockstep_ratio(speed, float(largest))


def test_rates_without_a_lock_step_measurement_give_no_ratio():
    assert lockstep_ratio({"decode_tok_s": 20.0}, 4) is None
    assert lockstep_ratio({"lockstep_ratio": {"x": 1.0}}, 4) is None


@pytest.mark.model
def test_a_lock_step_step_of_several_sequences_costs_less_than_as_many_steps_of_one():
    from ragleak.rag.models import DEFAULT_MODEL, model_path

    ratios = measure_lockstep(model_path(DEFAULT_MODEL), 1, sizes=(4,), steps=6)
    assert set(ratios) == {"4"} and 0.5 < ratios["4"] < 4.0  # one read of the weights serves all four


@pytest.mark.model
def test_a_measured_rate_is_the_median_of_its_repeated_timings_with_their_range():
    from ragleak.rag.models import DEFAULT_MODEL

    measured = measure_speed(DEFAULT_MODEL, 1, decode_tokens=16, repeats=3)
    assert measured["repeats"] == 3 and set(measured["lockstep_ratio"]) == {"2", "4", "8"}
    for rate in ("prefill_tok_s", "decode_tok_s"):
        low, high = measured[f"{rate}_range"]
        assert 0 < low <= measured[rate] <= high
