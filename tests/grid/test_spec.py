from __future__ import annotations

import pytest

from ragleak.errors import ConfigError
from ragleak.grid.streams import group_streams
from ragleak.grid.spec import GridConfig, grid_from_dict, preset


def test_paper_preset_is_432_cells_with_unique_ids():
    cells = preset("paper").expand()
    assert len(cells) == 432 == 6 * 6 * 3 * 2 * 2
    assert len({c.cell_id for c in cells}) == 432


def test_cell_id_changes_with_any_part_of_the_spec():
    base = GridConfig(attacks=["ps"], defenses=["none"], corpora=["synthetic-corp"]).expand()[0]
    assert base.cell_id == GridConfig(attacks=["ps"], defenses=["none"], corpora=["synthetic-corp"]).expand()[0].cell_id
    for change in ({"seed": 1}, {"epsilon": 1.0}, {"mode": "multi"}, {"stack": base.stack.model_copy(update={"top_k": 3})}):
        assert base.model_copy(update=change).cell_id != base.cell_id


def test_dry_run_counts_shared_generations():
    cells = preset("paper").expand()
    streams = group_streams(cells)
    assert len(streams) < 432  # epsilon is inert for the non-DP defenses
    assert sorted(c.cell_id for chain in streams.values() for c in chain) == sorted(c.cell_id for c in cells)


def test_bad_grid_configs_name_the_field():
    with pytest.raises(ConfigError, match="attacks"):
        grid_from_dict({"attacks": [], "defenses": ["none"], "corpora": ["synthetic-corp"]})
    with pytest.raises(ConfigError, match="epsilons"):
        grid_from_dict({"attacks": ["ps"], "defenses": ["none"], "corpora": ["x"], "epsilons": [-1]})
    with pytest.raises(ConfigError, match="same cell twice"):
        GridConfig(attacks=["ps", "ps"], defenses=["none"], corpora=["synthetic-corp"]).expand()


def test_demo_preset_meets_the_brief_and_every_name_is_registered():
    from ragleak.attacks import ATTACKS
    from ragleak.corpora import CORPORA
    from ragleak.defenses import DEFENSES

    config = preset("demo")
    assert len(config.attacks) >= 3 and len(config.corpora) == 1
    assert set(config.defenses) == {"none", "dp-retrieval", "ca-dp", "private-rag", "pad-regex", "lprag"}
    assert "asymmetry" in config.attacks  # the report's knowledge-asymmetry section has cells to show
    for name in ("demo", "paper", "canary"):
        c = preset(name)
        assert all(a in ATTACKS.names() for a in c.attacks) and all(d in DEFENSES.names() for d in c.defenses)
        assert all(k in CORPORA.names() for k in c.corpora)
        for cell in c.expand()[:50]:  # every cell's parameters construct
            ATTACKS.get(cell.attack)(**cell.attack_params)


def test_grid_epsilon_sets_each_defense_s_declared_parameter_or_is_inert():
    from ragleak.defenses import DEFENSES
    from ragleak.grid.cell import _defense
    from ragleak.grid.spec import CellSpec

    for name in DEFENSES.names():
        cls = DEFENSES.get(name)
        cell = CellSpec(attack="ps", defense=name, corpus="synthetic-corp", epsilon=3.0)
        if cls.epsilon_param is None:
            assert cell.applied_epsilon is None
            continue
        assert cls.epsilon_param in cls.Params.model_fields, name
        assert cell.applied_epsilon == 3.0
        assert getattr(_defense(cell).params, cls.epsilon_param) == 3.0
        explicit = cell.model_copy(update={"defense_params": {cls.epsilon_param: 2.0}})
        assert explicit.applied_epsilon is None and getattr(_defense(explicit).params, cls.epsilon_param) == 2.0
    # the DP defenses of the paper grid all take it, so its two epsilons are two experiments
    assert {d for d in preset("paper").defenses if DEFENSES.get(d).epsilon_param} >= {
        "dp-retrieval", "ca-dp", "private-rag"}


def test_paper_preset_runs_the_paper_protocol():
    """Issue 16: PAD is the regex masker, MI is 10 members vs 100 non-members on corpora that hold
    them, and the extraction prompts come from the general-text pool, not our corpora's parts."""
    from ragleak.attacks import ATTACKS
    from ragleak.corpora import load_corpus

    config = preset("paper")
    assert set(config.defenses) == {"none", "dp-retrieval", "ca-dp", "private-rag", "pad-regex", "lprag"}
    mi = ATTACKS.get("mi").Params(**config.attack_params["mi"])
    assert (mi.n_members, mi.n_nonmembers) == (10, 100)
    for corpus in config.corpora:
        docs = load_corpus(corpus, **config.corpus_params[corpus])
        assert len(docs) >= mi.kb_size + mi.n_nonmembers, corpus
    for attack in ("ps", "pm"):
        assert ATTACKS.get(attack).Params(**config.attack_params[attack]).pool_version == "2"
    assert config.attack_params["deal"]["seed_pool_version"] == "2"


def test_canary_preset_is_three_seeds_of_fifty_queries_from_the_pool_without_echo():
    from ragleak.attacks.pools import load_pool

    config = preset("canary")
    assert config.seeds == [101, 102, 103] and config.budgets == {"canary": 50}
    params = config.attack_params["canary"]
    assert len(load_pool(params["pool"], params["pool_version"]).items) == 50


def test_dry_run_lines_name_every_attack_s_budget():
    from ragleak.grid.spec import budget_lines

    config = preset("paper")
    lines = budget_lines(config, config.expand())
    assert any(line.startswith("mi: 72 cells") and "n_nonmembers=100" in line for line in lines)
    assert sum(1 for line in lines if " cells x " in line) == 6
