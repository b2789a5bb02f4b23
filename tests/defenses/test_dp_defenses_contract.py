"""The four DP defenses (dp-retrieval, ca-dp, private-rag, dp-synthetic) keep the Defense contract:
``hooks`` is exactly the set of overridden hooks, params round-trip through JSON, and every one
returns a full formal guarantee that the accountant can evaluate."""

from __future__ import annotations

import math

import pytest

from ragleak.accounting import build_card, epsilon_after
from ragleak.errors import ConfigError
from ragleak.defenses import DEFENSES, make_defense
from ragleak.records import HOOK_NAMES

MINE = {
    "dp-retrieval": {"score_retrieval"},
    "ca-dp": {"score_retrieval", "rewrite_context"},
    "private-rag": {"score_retrieval", "generate"},
    "dp-synthetic": {"rewrite_context"},
}


@pytest.mark.parametrize("name", sorted(MINE))
def test_hooks_are_exactly_the_overridden_ones(name):
    d = make_defense(name)
    assert d.name == name and DEFENSES.get(name) is type(d)
    assert set(d.hooks) == MINE[name] == {h for h in HOOK_NAMES if d.overrides(h)}


@pytest.mark.parametrize("name", sorted(MINE))
def test_params_round_trip_and_guarantee_is_formal(name):
    d = make_defense(name)
    again = make_defense(name, **d.params.model_dump(mode="json"))
    assert again.params == d.params
    g = d.guarantee()
    assert g.is_formal and g.notes
    e = epsilon_after(g, 10, shown=g.boundary)
    assert math.isfinite(e.eps) and not e.void
    assert build_card(name, g).curve[0].claim.eps == pytest.approx(epsilon_after(g, 1).eps)


@pytest.mark.parametrize("name, bad", [
    ("dp-retrieval", {"epsilon": 0}), ("dp-retrieval", {"clip_low": 1.0, "clip_high": 0.5}),
    ("ca-dp", {"turn_epsilon": 2.0, "conversation_epsilon": 1.0}), ("private-rag", {"max_charges": 0}),
    ("dp-synthetic", {"keywords_per_doc": 0}),
])
def test_invalid_params_are_rejected(name, bad):
    with pytest.raises(ConfigError, match=f"defense '{name}': invalid parameter"):
        make_defense(name, **bad)
