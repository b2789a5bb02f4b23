"""Stored rates: one copy and several at once kept apart; a measurement whose copy fails is an
error, not a hang and not a rate."""

from __future__ import annotations

import pytest

from ragleak.rag.speed import measure_concurrent, save_speed, speed_key, stored_speed


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
