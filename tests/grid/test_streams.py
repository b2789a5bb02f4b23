"""Generation streams (``grid.streams``): cells that make the same generations share one stream,
so the cache lets only the first pay (expected counts derived by hand in each test)."""

from __future__ import annotations

from ragleak.grid.spec import GridConfig
from ragleak.grid.streams import carries_answers, group_streams, stream_chains, stream_key

CORPUS = {"corpora": ["synthetic-corp"], "corpus_params": {"synthetic-corp": {"n_docs": 12}}}


def _streams(config: GridConfig) -> list[list[tuple]]:
    return [[(c.attack, c.defense, c.mode, c.epsilon) for c in chain] for chain in group_streams(config.expand()).values()]


def test_fixed_query_attacks_share_with_the_baseline_only_in_single_prompts_and_pm_ignores_the_mode():
    config = GridConfig(attacks=["ps", "pm"], defenses=["none", "pad", "dp-retrieval"], modes=["single", "multi"],
                        epsilons=[1.0, 5.0], budget=2, **CORPUS)
    streams = _streams(config)
    # ps single: none and pad (postprocess only) share one baseline stream across both epsilons;
    #            dp-retrieval one per epsilon                                    -> 3 streams, 6 cells
    # ps multi:  the history carries the defended answers: none 1, pad 1, dp 2   -> 4 streams, 6 cells
    # pm: its own conversations (answers carried; the grid's mode never reaches them), so single and
    #     multi coincide: none 1, pad 1, dp-retrieval 2                          -> 4 streams, 12 cells
    assert sum(map(len, streams)) == 24 and len(streams) == 11
    assert [("ps", "none", "single", 1.0), ("ps", "none", "single", 5.0),
            ("ps", "pad", "single", 1.0), ("ps", "pad", "single", 5.0)] in streams
    assert [("ps", "pad", "multi", 1.0), ("ps", "pad", "multi", 5.0)] in streams
    assert [("pm", "none", "single", 1.0), ("pm", "none", "single", 5.0),
            ("pm", "none", "multi", 1.0), ("pm", "none", "multi", 5.0)] in streams
    assert [("pm", "dp-retrieval", "single", 1.0), ("pm", "dp-retrieval", "multi", 1.0)] in streams


def test_adaptive_attacks_never_share_with_the_baseline():
    config = GridConfig(attacks=["ikea"], defenses=["none", "pad"], epsilons=[1.0, 5.0], budget=2, **CORPUS)
    # the answers choose the next query, so pad's answers make its own stream; epsilon is inert for both
    assert _streams(config) == [[("ikea", "none", "single", 1.0), ("ikea", "none", "single", 5.0)],
                                [("ikea", "pad", "single", 1.0), ("ikea", "pad", "single", 5.0)]]


def test_a_ps_of_several_turns_carries_answers_in_either_mode():
    config = GridConfig(attacks=["ps"], defenses=["none", "pad"], modes=["single", "multi"], budget=2,
                        attack_params={"ps": {"turns": 2}}, **CORPUS)
    cells = config.expand()
    assert all(carries_answers(c) for c in cells)
    # its conversations see pad's answers: no sharing with the baseline; the mode is inert
    assert len({stream_key(c) for c in cells}) == 2


def test_chains_put_the_costliest_stream_first_and_keep_grid_order_on_ties():
    config = GridConfig(attacks=["ps", "mi"], defenses=["none", "dp-retrieval"], budget=2, epsilons=[1.0], **CORPUS)
    cost = {"mi": 1.0, "ps": 1.0}
    chains = stream_chains(config.expand(), lambda c: cost[c.attack] + (c.defense == "dp-retrieval"))
    assert [(ch[0].attack, ch[0].defense) for ch in chains] == [("ps", "dp-retrieval"), ("mi", "dp-retrieval"),
                                                               ("ps", "none"), ("mi", "none")]
