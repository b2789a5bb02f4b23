"""The dry-run plan counts generation streams as the cache will share them (expected counts
derived by hand in each test), the model calls they make and an ETA from stored rates."""

from __future__ import annotations

import pytest

from ragleak.grid.completions import summarise
from ragleak.grid.plan import plan_summary
from ragleak.grid.tokens import PromptTokenCounter
from ragleak.grid.spec import GridConfig
from ragleak.rag.speed import save_speed, stored_speed

CORPUS = {"corpora": ["synthetic-corp"], "corpus_params": {"synthetic-corp": {"n_docs": 12}}}


def test_fixed_query_attacks_share_with_the_baseline_only_in_single_prompts_and_pm_ignores_the_mode():
    config = GridConfig(attacks=["ps", "pm"], defenses=["none", "pad", "dp-retrieval"], modes=["single", "multi"],
                        epsilons=[1.0, 5.0], budget=2, **CORPUS)
    plan = plan_summary(config)
    # ps single: none and pad (postprocess only) share one baseline stream across both epsilons;
    #            dp-retrieval one per epsilon                                    -> 3 streams, 6 cells
    # ps multi:  the history carries the defended answers: none 1, pad 1, dp 2   -> 4 streams, 6 cells
    # pm: its own conversations (answers carried; the grid's mode never reaches them), so single and
    #     multi coincide: none 1, pad 1, dp-retrieval 2                          -> 4 streams, 12 cells
    assert plan["cells"] == 24
    assert plan["distinct_generation_streams"] == 11 and plan["shared_by_cache"] == 13
    assert plan["by_kind"] == {"fixed/single": {"cells": 6, "streams": 3},
                               "fixed/multi": {"cells": 18, "streams": 8}}
    assert plan["queries"] == 11 * 2 and plan["model_calls"] == 22  # one generation per query, no agent


def test_adaptive_attacks_never_share_with_the_baseline():
    config = GridConfig(attacks=["ikea"], defenses=["none", "pad"], epsilons=[1.0, 5.0], budget=2, **CORPUS)
    plan = plan_summary(config)
    # the answers choose the next query, so pad's answers make its own stream; epsilon is inert for both
    assert (plan["cells"], plan["distinct_generation_streams"]) == (4, 2)
    assert plan["by_kind"] == {"adaptive/single": {"cells": 4, "streams": 2}}
    assert plan["model_calls"] == 2 * 2 * (1 + 2)  # per query: the target, then IKEA's two attacker calls


@pytest.mark.parametrize("audit,calls", [("all", 3 + 2 * 3), ("sample", 4), ("off", 3)])
def test_model_calls_and_decoding_work_follow_the_audit_policy(audit, calls):
    config = GridConfig(attacks=["ps"], defenses=["none", "private-rag"], epsilons=[1.0, 5.0], budget=3,
                        defense_params={"private-rag": {"voters": 4}}, audit=audit, **CORPUS)
    plan = plan_summary(config)
    # none: 1 stream (epsilon inert), 3 plain generations; private-rag: one stream per epsilon, each
    # query voted over 4 voters + the public sequence, plus the audit's reference generations
    assert plan["distinct_generation_streams"] == 3
    assert plan["model_calls"] == calls  # sample: 3 + 2 x 3 x 0.1 = 3.6
    references = {"all": 1.0, "sample": 0.1, "off": 0.0}[audit]
    assert plan["generations"] == round(3 + 2 * 3 * (5 + references))
    assert plan["audit"]["mode"] == audit


def test_the_default_budget_comes_from_the_attack_for_the_cells_corpus():
    config = GridConfig(attacks=["mi"], defenses=["none"], corpora=["synthetic-corp"],
                        attack_params={"mi": {"scorers": ["heuristic"], "n_members": 2, "n_nonmembers": 3,
                                              "kb_size": 6}},
                        corpus_params={"synthetic-corp": {"n_docs": 12}})
    plan = plan_summary(config)
    assert plan["queries"] == 5  # one heuristic probe per candidate: 2 members + 3 non-members


def test_eta_uses_the_stored_rates_and_says_when_it_has_none(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGLEAK_HOME", str(tmp_path))
    config = GridConfig(attacks=["ps"], defenses=["none"], budget=3, **CORPUS)
    plan = plan_summary(config)
    assert plan["eta_s"] is None and "ragleak models --bench" in plan["eta_basis"]["hint"]
    model = config.stack.model
    save_speed(model, {"threads": 1, "prefill_tok_s": 100.0, "decode_tok_s": 10.0})
    assert stored_speed(model, 1)["decode_tok_s"] == 10.0 and stored_speed(model, 2) is None
    count = PromptTokenCounter(tmp_path / "t.json", count=lambda text: len(text.split()))
    prompt = count("synthetic-corp", {"n_docs": 12}, config.stack).prompt
    plan = plan_summary(config, completions=summarise({}, "none"), tokens=count)
    # per generation: the corpus's prompt / 100 + 256 / 10 s (no observed answer length: the cap); 3 generations
    assert plan["eta_s"] == plan["eta_upper_s"] == round(3 * (prompt / 100 + 25.6))


def test_the_cli_dry_run_takes_the_audit_options_and_checks_them(tmp_path, monkeypatch):
    import json

    from typer.testing import CliRunner

    from ragleak.cli import app

    grid = tmp_path / "grid.yaml"
    grid.write_text("attacks: [ps]\ndefenses: [none, private-rag]\ncorpora: [synthetic-corp]\nbudget: 3\n"
                    "corpus_params: {synthetic-corp: {n_docs: 12}}\n")
    # a machine with no stored token rates (CI's fresh home) would measure the model here:
    # --no-measure keeps this a logic test (the measuring dry run has its own model test)
    monkeypatch.setenv("RAGLEAK_HOME", str(tmp_path / "home"))
    runner = CliRunner()
    result = runner.invoke(app, ["grid", "--config", str(grid), "--dry-run", "--json", "--audit", "off", "--no-measure"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["audit"] == {"mode": "off", "fraction": 0.1} and plan["model_calls"] == 3
    bad = runner.invoke(app, ["grid", "--config", str(grid), "--dry-run", "--audit", "most"])
    assert bad.exit_code != 0 and "audit" in str(bad.exception)


def test_a_cell_that_will_fail_is_planned_at_its_attacks_default_budget():
    # the knowledge base takes every document, so MI has no non-member: the cell records the error
    config = GridConfig(attacks=["mi"], defenses=["none"], corpora=["synthetic-corp"],
                        attack_params={"mi": {"kb_size": 12}}, corpus_params={"synthetic-corp": {"n_docs": 12}})
    assert plan_summary(config)["queries"] == 220  # MembershipInference.default_budget


def test_a_dry_run_measures_an_installed_model_without_stored_rates_once(tmp_path, monkeypatch):
    import ragleak.rag.speed as speed

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


def test_a_context_budget_defense_is_priced_bare_after_its_budget_and_its_tail_is_paid_once(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGLEAK_HOME", str(tmp_path))
    config = GridConfig(attacks=["ps"], defenses=["ca-dp", "dp-retrieval"], epsilons=[1.0, 5.0], budget=10,
                        defense_params={"ca-dp": {"turn_epsilon": 1.0}}, **CORPUS)
    save_speed(config.stack.model, {"threads": 1, "prefill_tok_s": 100.0, "decode_tok_s": 10.0})
    count = PromptTokenCounter(tmp_path / "t.json", count=lambda text: len(text.split()))
    tokens = count("synthetic-corp", {"n_docs": 12}, config.stack)
    plan = plan_summary(config, completions=summarise({}, "none"), tokens=count)
    # ca-dp's budget of eps 1 (5) affords 1 (5) queries at eps 1 each: those get passages; the
    # other queries are the bare question, the same prompts in both cells: queries 2-10 once
    assert plan["eta_basis"]["context_budget"] == {
        "ca-dp": {"streams": 2, "with_context": 6.0, "bare": 9.0}}
    assert plan["model_calls_expected"] == 6 + 9 + 2 * 10  # dp-retrieval: every query, each epsilon
    full, bare = tokens.prompt / 100 + 25.6, tokens.frame_tokens / 100 + 25.6
    assert plan["eta_s"] == round((6 + 20) * full + 9 * bare)
    assert plan["eta_upper_s"] == round(40 * full)  # the upper bound gives every query its passages


def test_a_fixed_query_attack_is_planned_at_most_at_its_whole_query_set_whatever_its_budget():
    mi = {"scorers": ["heuristic"], "n_members": 2, "n_nonmembers": 3, "kb_size": 6}
    config = GridConfig(attacks=["mi", "ikea"], defenses=["none"], budget=12, attack_params={"mi": mi}, **CORPUS)
    plan = plan_summary(config)
    # MI has 5 probes (2 members + 3 non-members, one scorer) and sends no more under a budget of
    # 12; IKEA writes its queries from the answers, so its budget is what it may send
    assert plan["queries"] == 5 + 12
