"""The dry run's ETA (``grid.eta``): per-cell arithmetic on hand-made numbers, the upper bound,
queries per cell, and the makespan over workers; and the CLI's dry run that prints it."""

from __future__ import annotations

import json

import pytest

from ragleak.grid import eta
from ragleak.grid.eta import ANSWERS, FRAME_TOKENS, CellCost, Estimator, Rates, cell_seconds, grid_eta
from ragleak.grid.spec import GridConfig

CORPUS = {"corpora": ["synthetic-corp"], "corpus_params": {"synthetic-corp": {"n_docs": 12}}}
RATES = Rates(prefill_tok_s=100.0, decode_tok_s=10.0)


def test_a_cell_costs_its_queries_times_prefill_and_decode_and_the_upper_bound_decodes_to_the_cap():
    cost = CellCost(queries=4, prompt_tokens=500.0, answer_tokens=50.0, own_calls=0.5, own_tokens=20.0,
                    max_tokens=100)
    # 4 x (500 / 100 + (50 + 0.5 x 20) / 10) = 4 x (5 + 6) = 44 s
    assert cost.seconds(RATES) == pytest.approx(44.0)
    # 4 x (5 + 100 x (1 + 0.5) / 10) = 4 x 20 = 80 s
    assert cost.upper_seconds(RATES) == pytest.approx(80.0)
    assert cost.model_calls == 6.0


def test_the_estimate_of_a_ps_cell_reads_its_corpus_budget_and_answer_table(monkeypatch):
    config = GridConfig(attacks=["ps"], defenses=["none"], budget=3, **CORPUS)
    (cell,) = config.expand()
    cost = Estimator()(cell)
    assert cost.queries == 3 and cost.answer_tokens == ANSWERS["ps"][0] and cost.own_calls == 0.0
    assert cost.max_tokens == 256
    # the frame and top_k (5) passages: synthetic-corp's documents are short (~360 characters), one chunk each
    assert FRAME_TOKENS + 5 * 200 / eta.CHARS_PER_TOKEN < cost.prompt_tokens < FRAME_TOKENS + 5 * 600 / eta.CHARS_PER_TOKEN
    # a conversation's turns carry earlier turns: the prompt grows
    multi = cell.model_copy(update={"mode": "multi"})
    assert Estimator()(multi).prompt_tokens > cost.prompt_tokens
    # an answer never exceeds the cap
    decoding = cell.stack.decoding.model_copy(update={"max_tokens": 16})
    capped = cell.model_copy(update={"stack": cell.stack.model_copy(update={"decoding": decoding})})
    assert Estimator()(capped).answer_tokens == 16


def test_queries_per_cell_follow_the_attack():
    mi = {"scorers": ["heuristic"], "n_members": 2, "n_nonmembers": 3, "kb_size": 6}
    config = GridConfig(attacks=["mi", "ikea"], defenses=["none"], budget=12, attack_params={"mi": mi}, **CORPUS)
    mi_cell, ikea_cell = config.expand()
    # MI has 5 probes (2 members + 3 non-members, one scorer) and sends no more under a budget of
    # 12; IKEA writes its queries from the answers, so its budget is what it may send
    assert (Estimator()(mi_cell).queries, Estimator()(ikea_cell).queries) == (5, 12)
    unbudgeted = GridConfig(attacks=["mi"], defenses=["none"], attack_params={"mi": mi}, **CORPUS).expand()[0]
    assert Estimator()(unbudgeted).queries == 5  # the attack's default for the cell's corpus
    # a cell that will fail (no non-member left: the knowledge base takes every document) at the default
    failing = GridConfig(attacks=["mi"], defenses=["none"], attack_params={"mi": {"kb_size": 12}}, **CORPUS)
    assert Estimator()(failing.expand()[0]).queries == 220  # MembershipInference.default_budget


def test_twins_cost_nothing_and_the_makespan_splits_over_workers():
    config = GridConfig(attacks=["ps"], defenses=["none", "pad", "dp-retrieval"], epsilons=[1.0, 5.0], budget=2,
                        **CORPUS)
    cells = config.expand()
    seconds = cell_seconds(cells, {config.stack.model: RATES})
    # none and pad share one baseline stream across both epsilons (its first cell pays); dp one per epsilon
    paying = [s for s, _ in seconds.values() if s > 0]
    assert len(paying) == 3 and len(set(round(s, 6) for s in paying)) == 1
    one = grid_eta(cells, {config.stack.model: RATES}, workers=1)
    two = grid_eta(cells, {config.stack.model: RATES}, workers=2)
    assert (one.cells, one.streams) == (6, 3)
    assert one.expected_s == pytest.approx(3 * paying[0])
    assert two.expected_s == pytest.approx(2 * paying[0])  # three equal streams on two workers
    for e in (one, two):
        assert e.upper_s >= e.expected_s > 0


def test_without_measured_rates_the_eta_is_unknown_and_says_which_model():
    config = GridConfig(attacks=["ps"], defenses=["none"], budget=2, **CORPUS)
    unknown = grid_eta(config.expand(), {})
    assert unknown.expected_s is None and unknown.missing_rates == (config.stack.model,)
    assert unknown.model_calls == 2


def test_the_cli_dry_run_prints_streams_calls_eta_and_the_committed_check(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from ragleak.cli import app
    from ragleak.rag.speed import save_speed

    grid = tmp_path / "grid.yaml"
    grid.write_text("attacks: [ps]\ndefenses: [none, pad]\ncorpora: [synthetic-corp]\nbudget: 3\n"
                    "corpus_params: {synthetic-corp: {n_docs: 12}}\n")
    monkeypatch.setenv("RAGLEAK_HOME", str(tmp_path / "home"))
    runner = CliRunner()
    args = ["grid", "--config", str(grid), "--dry-run", "--no-measure", "--workers", "1"]
    plan = json.loads(runner.invoke(app, args + ["--json"]).stdout)
    assert (plan["cells"], plan["distinct_generation_streams"], plan["model_calls"]) == (2, 1, 3)
    assert plan["eta_s"] is None and plan["missing_rates"] == ["qwen2.5-coder-0.5b"]
    save_speed("qwen2.5-coder-0.5b", {"threads": 1, "prefill_tok_s": 100.0, "decode_tok_s": 10.0})
    plan = json.loads(runner.invoke(app, args + ["--json"]).stdout)
    assert 0 < plan["eta_s"] <= plan["eta_upper_s"]
    text = runner.invoke(app, args)
    assert text.exit_code == 0, text.output
    out = " ".join(text.output.split())
    assert "2 cells; 1 distinct generation streams" in out and "about 3 model calls" in out
    check = plan["check"]
    if check is not None:  # a source checkout with the committed check
        assert f"a real run of {check['cells']} cells took {check['ratio']:.2f}x" in out
    bad = runner.invoke(app, ["grid", "--config", str(grid), "--dry-run", "--audit", "most"])
    assert bad.exit_code != 0 and "audit" in str(bad.exception)
