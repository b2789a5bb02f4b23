"""The CI outputs' words for a hook's effect: what the counts in Table I count."""

from __future__ import annotations

from ragleak.report.ci import _dynamic


def test_effect_counts_say_whether_they_count_channels_or_the_hooks_own_output():
    channel = {"dynamic": {"changed": 0, "calls": 12, "basis": "channel", "output_changed": 12}}
    assert _dynamic(channel) == ", changed its channel in 0 of 12 calls"
    old = {"dynamic": {"changed": 3, "calls": 12}}  # a record from before the per-channel effect
    assert _dynamic(old) == ", its own output changed in 3 of 12 calls"
    assert _dynamic({"dynamic": None}) == "" and _dynamic({}) == ""
