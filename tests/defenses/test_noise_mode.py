"""Where DP noise comes from: a named seed (an audit, bit for bit what it always drew) or fresh OS
entropy (serving users: the Python API's default), and the card saying which."""

from __future__ import annotations

import numpy as np
import pytest

from ragleak.accounting import build_card
from ragleak.accounting.card import FIXED_SEED
from ragleak.context import RunContext
from ragleak.defenses import make_defense
from ragleak.errors import ConfigError
from ragleak.testing import tiny_stack


def _draws(ctx: RunContext) -> list[float]:
    return ctx.noise_rng("defense/dp-retrieval").laplace(size=4).tolist()


def test_a_fixed_seed_draws_the_seeded_stream_bit_for_bit():
    # grid cells and verify keep what they drew before the noise mode existed: rng(name) itself
    expected = np.random.default_rng([7, int.from_bytes(__import__("hashlib").sha256(
        b"defense/dp-retrieval").digest()[:8], "little")]).laplace(size=4).tolist()
    assert _draws(RunContext(seed=7)) == expected == _draws(RunContext(seed=7, noise="fixed-seed"))


def test_fresh_noise_differs_between_contexts_with_the_same_seed():
    a, b = RunContext(seed=7, noise="fresh"), RunContext(seed=7, noise="fresh")
    assert _draws(a) != _draws(b)
    assert a.rng("attack").random() == b.rng("attack").random()  # an attack's own stream stays seeded
    with pytest.raises(ConfigError, match="unknown noise mode"):
        RunContext(noise="replayable")  # type: ignore[arg-type]


def test_the_python_api_serves_fresh_noise_and_a_named_seed_is_an_audit(fact_index):
    from ragleak.pipeline.build import build_target

    stack = tiny_stack()
    assert build_target(stack, fact_index, make_defense("dp-retrieval")).pipeline.ctx.noise == "fresh"
    assert stack.context().noise == "fresh" and stack.context(3).noise == "fixed-seed"
    assert stack.context(noise="fixed-seed").seed == stack.config.seed
    assert make_defense("ca-dp").ctx.noise == "fresh"  # a defense never prepared states what it would deploy


@pytest.mark.parametrize("name", ["dp-retrieval", "ca-dp", "private-rag", "dp-vote", "dp-synthetic"])
def test_the_card_says_whether_the_noise_seed_was_fixed(name):
    deployed = make_defense(name)
    card = build_card(name, deployed.guarantee(), queries=(1,))
    assert card.guarantee.noise == "fresh" and "fresh" in card.noise and FIXED_SEED not in card.warnings
    audited = make_defense(name)
    audited.prepare(RunContext(seed=3))
    card = build_card(name, audited.guarantee(), queries=(1,))
    assert card.noise == FIXED_SEED and FIXED_SEED in card.warnings


def test_the_card_says_where_the_budgets_live(tmp_path):
    d = make_defense("ca-dp")
    assert "kept in memory" in build_card("ca-dp", d.guarantee(), queries=(1,)).resets
    d.prepare(RunContext(budgets=tmp_path / "idx.budgets.sqlite"))
    resets = build_card("ca-dp", d.guarantee(), queries=(1,)).resets
    assert str(tmp_path / "idx.budgets.sqlite") in resets and "survive a restart" in resets
    pr = make_defense("private-rag")
    pr.prepare(RunContext(budgets=tmp_path / "idx.budgets.sqlite"))
    assert "survive a restart" in build_card("private-rag", pr.guarantee(), queries=(1,)).resets
