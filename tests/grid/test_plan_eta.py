"""The dry run's ETA: prompts as long as the corpus makes them, answers as long as they were
observed (a run's cache, or the stored table), attacker calls at their decode caps, and an upper
bound at every cap. Expected values are derived by hand from the formula in each test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragleak.config import StackConfig
from ragleak.grid.completions import (CompletionTable, VotingStats, attack_calls, observe, stored_table, summarise,
                                     voting_use)
from ragleak.grid.plan import HISTORY_TURNS, TOKENS_PER_SENTENCE, plan_summary
from ragleak.grid.spec import GridConfig
from ragleak.grid.tokens import QUERY_WORDS, TOKENS_PER_WORD, PromptTokenCounter
from ragleak.rag.cache import GenerationCache
from ragleak.rag.generator import DecodingParams, Generation
from ragleak.rag.models import MODELS
from ragleak.rag.speed import save_speed

CORPUS = {"corpora": ["synthetic-corp"], "corpus_params": {"synthetic-corp": {"n_docs": 12}}}
MODEL = StackConfig().model
PREFILL, DECODE = 100.0, 10.0


def words(text: str) -> int:
    return len(text.split())


@pytest.fixture
def rates(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGLEAK_HOME", str(tmp_path / "home"))
    save_speed(MODEL, {"threads": 1, "prefill_tok_s": PREFILL, "decode_tok_s": DECODE})


def corpus_folder(root: Path, words_per_doc: int, n: int = 6) -> Path:
    folder = root / f"docs-{words_per_doc}"
    folder.mkdir()
    for i in range(n):
        (folder / f"doc{i}.txt").write_text(" ".join(f"w{i}x{j}" for j in range(words_per_doc)) + "\n")
    return folder


def table(**samples: list[int]) -> CompletionTable:
    """A table of target completions: ``ps=[20, 40]`` -> two PS answers of 20 and 40 tokens."""
    return summarise({(attack.replace("_", "-"), "target", MODEL): [(c, 0, False) for c in values]
                      for attack, values in samples.items()}, "test table")


def test_prompt_tokens_follow_the_corpus_passage_length(tmp_path):
    stack = StackConfig(top_k=3, chunk_words=200, chunk_overlap=20)
    count = PromptTokenCounter(tmp_path / "t.json", count=words)
    short = count(str(corpus_folder(tmp_path, 30)), {}, stack)
    long = count(str(corpus_folder(tmp_path, 90)), {}, stack)
    # one passage per document ("Passage i: " adds two words); the frame does not depend on the corpus
    assert (short.passages, long.passages) == (6, 6)
    assert (short.passage_tokens, long.passage_tokens) == (32.0, 92.0)
    assert short.frame_tokens == long.frame_tokens > QUERY_WORDS
    assert long.prompt - short.prompt == 3 * 60  # top_k passages of 60 more words each


def test_the_models_tokenizer_counts_real_passages_and_its_count_is_kept(tmp_path):
    stack = StackConfig(top_k=2, chunk_words=200, chunk_overlap=20)
    count = PromptTokenCounter(tmp_path / "t.json")
    short = count(str(corpus_folder(tmp_path, 30)), {}, stack)
    long = count(str(corpus_folder(tmp_path, 90)), {}, stack)
    assert 2.5 < (long.passage_tokens - 2) / (short.passage_tokens - 2) < 3.5  # ~3x the words, ~3x the tokens
    if short.tokenizer.startswith("llama.cpp"):  # the model is installed: the count is kept on disk
        kept = PromptTokenCounter(tmp_path / "t.json")
        kept._tokenizers[MODEL] = None  # a kept count needs no tokenizer
        assert kept(str(tmp_path / "docs-30"), {}, stack) == short
    else:
        assert short.tokenizer == f"words x {TOKENS_PER_WORD} (assumed)"


def prompt_of(config: GridConfig, count: PromptTokenCounter) -> float:
    return count("synthetic-corp", config.corpus_params["synthetic-corp"], config.stack).prompt


def test_observed_answer_lengths_price_the_expected_eta_and_max_tokens_the_upper_bound(rates, tmp_path):
    config = GridConfig(attacks=["ps"], defenses=["none"], budget=3, **CORPUS)
    count = PromptTokenCounter(tmp_path / "t.json", count=words)
    prompt = prompt_of(config, count)
    # median 10, mean 40: the ETA sums calls, so it prices them at the mean
    plan = plan_summary(config, completions=table(ps=[10, 10, 100]), tokens=count)
    assert plan["eta_s"] == round(3 * (prompt / PREFILL + 40 / DECODE))
    assert plan["eta_upper_s"] == round(3 * (prompt / PREFILL + 256 / DECODE))
    used = plan["eta_basis"]["completions"]["used"]
    assert used == {f"ps/target/{MODEL}": {"median": 10.0, "mean": 40.0, "n": 3, "at_cap": 0.0}}
    assert plan["eta_basis"]["completions"]["source"] == "test table"
    # no observation of this attack: priced at the cap in both, and named
    plan = plan_summary(config, completions=table(mi=[10]), tokens=count)
    assert plan["eta_s"] == plan["eta_upper_s"]
    assert plan["eta_basis"]["completions"]["unobserved_at_cap"] == [f"ps/target/{MODEL}"]


def test_a_conversation_turn_carries_on_average_one_earlier_question_and_answer(rates, tmp_path):
    config = GridConfig(attacks=["ps"], defenses=["none"], modes=["multi"], budget=3, **CORPUS)
    count = PromptTokenCounter(tmp_path / "t.json", count=words)
    prompt = prompt_of(config, count) + HISTORY_TURNS * (QUERY_WORDS * TOKENS_PER_WORD + 20)
    plan = plan_summary(config, completions=table(ps=[20]), tokens=count)
    assert HISTORY_TURNS == 1.0
    assert plan["eta_s"] == round(3 * (prompt / PREFILL + 20 / DECODE))


def test_attacker_calls_are_priced_at_the_attacks_decode_cap(rates, tmp_path):
    config = GridConfig(attacks=["ikea"], defenses=["none"], budget=2, attack_params={"ikea": {"llm_max_tokens": 64}},
                        **CORPUS)
    count = PromptTokenCounter(tmp_path / "t.json", count=words)
    stack_prompt = prompt_of(config, count)
    frame = count("synthetic-corp", config.corpus_params["synthetic-corp"], config.stack).frame_tokens
    plan = plan_summary(config, completions=table(ikea=[30]), tokens=count)
    # per query: one target generation and two attacker calls; an attacker call reads the answer
    # (frame + 30 tokens, upper: frame + 256) and decodes to its cap of 64 (no observation of it)
    target_exp, target_up = stack_prompt / PREFILL + 30 / DECODE, stack_prompt / PREFILL + 256 / DECODE
    attacker_exp, attacker_up = (frame + 30) / PREFILL + 64 / DECODE, (frame + 256) / PREFILL + 64 / DECODE
    assert plan["eta_s"] == round(2 * target_exp + 4 * attacker_exp)
    assert plan["eta_upper_s"] == round(2 * target_up + 4 * attacker_up)
    # an observed attacker length and prompt replace the cap and the guess
    observed = summarise({("ikea", "target", MODEL): [(30, 0, False)],
                          ("ikea", "attacker", MODEL): [(12, 200, False)]}, "t")
    plan = plan_summary(config, completions=observed, tokens=count)
    assert plan["eta_s"] == round(2 * target_exp + 4 * (200 / PREFILL + 12 / DECODE))
    assert plan["eta_upper_s"] == round(2 * target_up + 4 * (200 / PREFILL + 64 / DECODE))


def test_the_eta_is_broken_down_by_attack_and_into_prefill_and_decoding(rates, tmp_path):
    config = GridConfig(attacks=["ps", "ikea"], defenses=["none"], budget=2,
                        attack_params={"ikea": {"llm_max_tokens": 64}}, **CORPUS)
    count = PromptTokenCounter(tmp_path / "t.json", count=words)
    prompt = prompt_of(config, count)
    frame = count("synthetic-corp", config.corpus_params["synthetic-corp"], config.stack).frame_tokens
    plan = plan_summary(config, completions=table(ps=[20], ikea=[30]), tokens=count)
    by_attack = plan["eta_basis"]["by_attack"]
    ps = 2 * (prompt / PREFILL + 20 / DECODE)
    ikea = 2 * (prompt / PREFILL + 30 / DECODE) + 4 * ((frame + 30) / PREFILL + 64 / DECODE)
    assert by_attack == {"ikea": {"expected_s": round(ikea), "upper_s": round(
                             2 * (prompt / PREFILL + 256 / DECODE) + 4 * ((frame + 256) / PREFILL + 64 / DECODE))},
                         "ps": {"expected_s": round(ps), "upper_s": round(2 * (prompt / PREFILL + 256 / DECODE))}}
    assert list(by_attack) == ["ikea", "ps"]  # the costliest first
    split = plan["eta_basis"]["expected_split_s"]
    assert split == {"prefill": round((4 * prompt + 4 * (frame + 30)) / PREFILL),
                     "decode": round((2 * 20 + 2 * 30 + 4 * 64) / DECODE)}
    assert abs(split["prefill"] + split["decode"] - plan["eta_s"]) <= 1


def test_without_rates_there_is_no_breakdown(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGLEAK_HOME", str(tmp_path / "home"))
    config = GridConfig(attacks=["ps"], defenses=["none"], budget=2, **CORPUS)
    plan = plan_summary(config, completions=table(ps=[20]), tokens=PromptTokenCounter(tmp_path / "t.json", count=words))
    assert plan["eta_s"] is None
    assert "by_attack" not in plan["eta_basis"] and "expected_split_s" not in plan["eta_basis"]


def private_rag_grid(tmp_path):
    """PS under private-rag (4 voters, 12 new tokens), budget 3: the grid, a word counter and its count."""
    config = GridConfig(attacks=["ps"], defenses=["private-rag"], budget=3, audit="off",
                        defense_params={"private-rag": {"voters": 4, "max_new_tokens": 12}}, **CORPUS)
    count = PromptTokenCounter(tmp_path / "t.json", count=words)
    return config, count, count("synthetic-corp", config.corpus_params["synthetic-corp"], config.stack)


def test_a_voting_defense_pays_each_prompt_its_share_of_the_passages_and_each_lock_step(rates, tmp_path):
    config, count, counted = private_rag_grid(tmp_path)
    # 4 voters of one passage each and the public prompt (none): 5 frames and 4 passages prefilled;
    # the answer (20 tokens observed) stops at the defense's 12 new tokens: 12 steps of 5 sequences
    prefill = 5 * counted.frame_tokens + 4 * counted.passage_tokens
    plan = plan_summary(config, completions=table(ps=[20]), tokens=count)
    assert plan["eta_s"] == round(3 * (prefill / PREFILL + 5 * 12 / DECODE))
    assert plan["eta_upper_s"] == plan["eta_s"]  # 12 < 20: the cap is the expectation
    short = plan_summary(config, completions=table(ps=[8]), tokens=count)
    assert short["eta_s"] == round(3 * (prefill / PREFILL + 5 * 8 / DECODE))
    assert plan["model_calls_expected"] == 0  # sequences are decoding, not model calls (audit off)
    # dp-vote deals its k documents into the voters' prompts
    config = GridConfig(attacks=["ps"], defenses=["dp-vote"], budget=2, audit="off",
                        defense_params={"dp-vote": {"voters": 2, "k": 6, "max_new_tokens": 4}}, **CORPUS)
    plan = plan_summary(config, completions=table(ps=[20]), tokens=count)
    prefill = 3 * counted.frame_tokens + 6 * counted.passage_tokens
    assert plan["eta_s"] == round(2 * (prefill / PREFILL + 3 * 4 / DECODE))


def test_a_voting_defense_is_priced_at_its_observed_answers_where_a_run_shows_them(rates, tmp_path):
    config, count, counted = private_rag_grid(tmp_path)
    # observed: 10 answers of 2 prompts (one real voter) and 1 passage on average, 5 steps each
    voting = voting_use([{"spec": {"defense": "private-rag", "attack": "ps", "stack": {"model": MODEL}},
                          "defense_state": {"voting_used": {"answers": 10, "prompts": 20, "passages": 10, "steps": 50}}}])
    observed = CompletionTable(table(ps=[20]).rows, "t", voting=voting)
    plan = plan_summary(config, completions=observed, tokens=count)
    assert plan["eta_s"] == round(3 * ((2 * counted.frame_tokens + counted.passage_tokens) / PREFILL + 2 * 5 / DECODE))
    # the upper bound keeps the shape's caps: 5 prompts holding 4 passages, 12 lock-step steps
    assert plan["eta_upper_s"] == round(3 * ((5 * counted.frame_tokens + 4 * counted.passage_tokens) / PREFILL
                                             + 5 * 12 / DECODE))
    assert plan["eta_basis"]["completions"]["voting_used"][f"private-rag/ps/{MODEL}"]["prompts_mean"] == 2.0
    assert plan["eta_basis"]["lockstep_unmeasured"] == [MODEL]  # these rates hold no lock-step measurement
    # another defense's or another attack's observations do not apply; unobserved: priced at the shape
    seen = voting[("private-rag", "ps", MODEL)]
    for key in (("dp-vote", "ps", MODEL), ("private-rag", "mi", MODEL)):
        other = CompletionTable(table(ps=[20]).rows, "t", voting={key: seen})
        assert plan_summary(config, completions=other, tokens=count)["eta_s"] == plan["eta_upper_s"]


def test_a_voting_answers_lock_step_steps_are_priced_at_their_measured_cost(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGLEAK_HOME", str(tmp_path / "home"))
    save_speed(MODEL, {"threads": 1, "prefill_tok_s": PREFILL, "decode_tok_s": DECODE,
                       "lockstep_ratio": {"2": 1.2, "4": 1.5, "8": 2.5}})
    config, count, counted = private_rag_grid(tmp_path)
    prefill = 5 * counted.frame_tokens + 4 * counted.passage_tokens
    plan = plan_summary(config, completions=table(ps=[20]), tokens=count)
    # 12 steps of 5 sequences, each step 1.5 + (2.5 - 1.5) / 4 one-sequence steps
    assert plan["eta_s"] == round(3 * (prefill / PREFILL + 12 * 1.75 / DECODE))
    assert plan["eta_upper_s"] == round(3 * (prefill / PREFILL + 5 * 12 / DECODE))  # the bound: per sequence
    assert "lockstep_unmeasured" not in plan["eta_basis"]
    # observed answers of 2 prompts: a step of two sequences
    voting = {("private-rag", "ps", MODEL): VotingStats("private-rag", "ps", MODEL, 1, 10, 2.0, 1.0, 5.0)}
    observed = plan_summary(config, completions=CompletionTable(table(ps=[20]).rows, "t", voting=voting), tokens=count)
    assert observed["eta_s"] == round(3 * ((2 * counted.frame_tokens + counted.passage_tokens) / PREFILL
                                           + 5 * 1.2 / DECODE))


def test_batched_streams_are_priced_one_query_at_a_time_and_say_so(rates, tmp_path):
    count = PromptTokenCounter(tmp_path / "t.json", count=words)
    plans = [plan_summary(GridConfig(attacks=["ps"], defenses=["none"], budget=4, audit="off",
                                     stack={"decoding": {"batch": batch}}, **CORPUS),
                          completions=table(ps=[20]), tokens=count) for batch in (1, 4)]
    assert plans[0]["eta_s"] == plans[1]["eta_s"]
    assert "batched_streams_priced_one_at_a_time" not in plans[0]["eta_basis"]
    assert plans[1]["eta_basis"]["batched_streams_priced_one_at_a_time"] == 1


def test_voting_use_averages_the_answers_of_finished_cells_and_survives_the_table_file():
    def cell(defense, model, used):
        return {"spec": {"defense": defense, "attack": "ikea", "stack": {"model": model}},
                "defense_state": {"voting_used": used}}

    cells = [cell("private-rag", "m", {"answers": 2, "prompts": 3, "passages": 1, "steps": 10}),
             cell("private-rag", "m", {"answers": 2, "prompts": 5, "passages": 3, "steps": 6}),
             cell("private-rag", "m", {"answers": 0, "prompts": 0, "passages": 0, "steps": 0}),  # a cell with no answer
             cell("none", "m", None), {"spec": {"defense": "dp-vote", "attack": "ikea", "stack": {"model": "m"}}}]
    stats = voting_use(cells)
    assert list(stats) == [("private-rag", "ikea", "m")]
    s = stats[("private-rag", "ikea", "m")]
    assert (s.cells, s.answers, s.prompts_mean, s.passages_mean, s.steps_mean) == (2, 4, 2.0, 1.0, 4.0)
    back = CompletionTable.from_json(json.loads(json.dumps(CompletionTable({}, "t", voting=stats).to_json())))
    assert back.voting_for("private-rag", "ikea", "m") == s and back.voting_for("dp-vote", "ikea", "m") is None


_COUNT = PromptTokenCounter(Path("/nonexistent/t.json"), count=words)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(attack=st.sampled_from(["ps", "ikea", "rag-thief"]), mode=st.sampled_from(["single", "multi"]),
       max_tokens=st.integers(16, 512), lengths=st.lists(st.integers(0, 600), min_size=1, max_size=5),
       attacker=st.lists(st.integers(0, 600), max_size=3))
def test_the_upper_bound_is_never_below_the_expected_eta(rates, attack, mode, max_tokens, lengths, attacker):
    config = GridConfig(attacks=[attack], defenses=["none"], modes=[mode], budget=2,
                        stack={"decoding": {"max_tokens": max_tokens}}, **CORPUS)
    samples = {(attack, "target", MODEL): [(c, 50, False) for c in lengths],
               (attack, "attacker", MODEL): [(c, 50, False) for c in attacker]}
    plan = plan_summary(config, completions=summarise(samples, "h"), tokens=_COUNT)
    assert 0 < plan["eta_s"] <= plan["eta_upper_s"]


def make_run(root: Path, attacks: dict[str, dict]) -> tuple[Path, str]:
    """A grid run folder: a cell and transcript per attack (each with one traced prompt) and a
    generation cache; returns the folder and the model id its entries use."""
    run = root / "run"
    (run / "cells").mkdir(parents=True)
    (run / "transcripts").mkdir()
    for i, (attack, params) in enumerate(attacks.items()):
        spec = {"attack": attack, "attack_params": params, "mode": "single", "stack": StackConfig().model_dump(mode="json")}
        (run / "cells" / f"c{i}.json").write_text(json.dumps({"cell_id": f"c{i}", "spec": spec}))
        (run / "transcripts" / f"c{i}.json").write_text(json.dumps(
            {"attack": attack, "queries": [{"trace": {"prompt": f"prompt of {attack}"}}]}))
    return run, MODELS[MODEL].sha256


def put(cache: GenerationCache, model_id: str, prompt: str, max_tokens: int, completion: int, prompt_tokens: int = 9):
    params = DecodingParams(max_tokens=max_tokens)
    cache.put(prompt + str(max_tokens), model_id, params, prompt,
              Generation(text="x", prompt_tokens=prompt_tokens, completion_tokens=completion, finish_reason="stop",
                         seconds=0.1))


def test_observe_attributes_traced_prompts_to_their_attack_and_attacker_calls_by_their_cap(tmp_path):
    run, model_id = make_run(tmp_path, {"ps": {}, "ikea": {"llm_max_tokens": 64}})
    cache = GenerationCache(run / "generations.sqlite")
    put(cache, model_id, "prompt of ps", 256, 30)
    put(cache, model_id, "prompt of ikea", 256, 10)
    put(cache, model_id, "an agent's prompt", 64, 64, prompt_tokens=120)  # only ikea decodes at 64
    put(cache, model_id, "another agent prompt", 64, 20, prompt_tokens=80)
    put(cache, model_id, "a voter's sequence", 256, 5)  # untraced, at the target's cap: unattributable
    cache.close()
    observed = observe(run)
    assert observed.get("ps", "target", MODEL).completion_median == 30.0
    assert observed.get("ikea", "target", MODEL).completion_median == 10.0
    agent = observed.get("ikea", "attacker", MODEL)
    assert (agent.n, agent.completion_median, agent.completion_mean, agent.prompt_median, agent.at_cap) == \
        (2, 42.0, 42.0, 100.0, 0.5)
    assert observed.unattributed == 1 and observed.source == f"observed in {run}"


def test_observe_attributes_a_call_at_the_targets_cap_only_where_its_settings_are_no_targets(tmp_path):
    # DEAL's optimizer decodes at the target's cap (256) but samples: a greedy untraced entry at 256
    # could be a target's (an audit reference, a voter) and stays unattributed
    run, model_id = make_run(tmp_path, {"deal": {"seed_pool": "shared-extraction", "seed_pool_version": "2"}})
    cache = GenerationCache(run / "generations.sqlite")
    sampled = DecodingParams(max_tokens=256, temperature=0.7, top_k=40, top_p=0.95, seed=3)
    cache.put("k1", model_id, sampled, "an optimizer prompt",
              Generation(text="x", prompt_tokens=40, completion_tokens=120, finish_reason="stop", seconds=0.1))
    put(cache, model_id, "an untraced greedy prompt", 256, 7)
    cache.close()
    observed = observe(run)
    agent = observed.get("deal", "attacker", MODEL)
    assert (agent.n, agent.completion_median, agent.prompt_median) == (1, 120.0, 40.0)
    assert observed.unattributed == 1


def test_observe_leaves_a_cap_two_attacks_share_unattributed(tmp_path):
    run, model_id = make_run(tmp_path, {"ikea": {"llm_max_tokens": 400}, "rag-thief": {}})  # rag-thief: 400 too
    cache = GenerationCache(run / "generations.sqlite")
    put(cache, model_id, "an agent's prompt", 400, 100)
    cache.close()
    observed = observe(run)
    assert observed.rows == {} and observed.unattributed == 1


def test_the_stored_table_says_where_it_comes_from():
    stored = stored_table()
    assert "benchmarks/plan_completions.py" in stored.source
    assert stored.get("ps", "target", MODEL) is not None
    for stats in stored.rows.values():
        assert stats.n >= 1 and 0 <= stats.completion_median and 0.0 <= stats.at_cap <= 1.0


def test_the_cli_dry_run_prints_the_expected_eta_and_the_upper_bound(rates, tmp_path):
    from typer.testing import CliRunner

    from ragleak.cli import app

    # two copies' rates stored too, so the dry run on 2 workers measures nothing
    save_speed(MODEL, {"threads": 1, "copies": 2, "prefill_tok_s": PREFILL, "decode_tok_s": DECODE})
    grid = tmp_path / "grid.yaml"
    grid.write_text("attacks: [ps]\ndefenses: [none]\ncorpora: [synthetic-corp]\nbudget: 3\n"
                    "corpus_params: {synthetic-corp: {n_docs: 12}}\n")
    runner = CliRunner()
    result = runner.invoke(app, ["grid", "--config", str(grid), "--dry-run", "--workers", "2"])
    assert result.exit_code == 0, result.output
    assert "(expected), <=" in result.output and "(upper bound at max_tokens)" in result.output
    assert "by attack: ps ~" in result.output and "prompt prefill" in result.output
    assert "by defense: none ~" in result.output
    # the basis in words, not as Python dicts
    assert f"rates: {MODEL} (1 thread) prefill " in result.output and "{" not in result.output
    assert "prompts: synthetic-corp" in result.output and "answer lengths: " in result.output
    run, model_id = make_run(tmp_path, {"ps": {}})
    cache = GenerationCache(run / "generations.sqlite")
    put(cache, model_id, "prompt of ps", 256, 7)
    cache.close()
    result = runner.invoke(app, ["grid", "--config", str(grid), "--dry-run", "--workers", "2", "--json", "--observe", str(run)])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["eta_s"] < plan["eta_upper_s"]
    assert plan["eta_basis"]["completions"]["source"] == f"observed in {run}"
    assert plan["eta_basis"]["completions"]["used"][f"ps/target/{MODEL}"]["median"] == 7.0
    bad = runner.invoke(app, ["grid", "--config", str(grid), "--observe", str(run), "--out", str(tmp_path / "o")])
    assert bad.exit_code != 0 and "--dry-run" in str(bad.exception)


def test_the_dry_runs_basis_reads_as_words():
    from ragleak.cli.grid import rates_text, source_text

    rates = {f"{MODEL}@1x2": {"prefill_tok_s": 114.7, "decode_tok_s": 28.6, "measured_at": "2026-12-06T16:32:43+00:00",
                              "load_1m": 1.61, "capped_at_one_copy": ["prefill_tok_s"]}}
    assert rates_text(rates) == (f"{MODEL} (1 thread, 2 copies at once) prefill 114.7, decode 28.6 tokens/s, "
                                 "measured 2026-12-06 16:32 at load 1.61; capped at one copy's prefill")
    assert source_text({"source": "measured by X from run 'a'", "earlier_sources": ["older", "oldest"]}) == (
        "measured by X from run 'a' (merged with 2 earlier tables; --json names them, and the table each row's run)")
    assert source_text({"source": "observed in /runs/r", "earlier_sources": []}) == "observed in /runs/r"


def test_the_tables_sources_stay_flat_through_a_round_trip():
    stored = stored_table()
    # each source one clause: merging never nests one table's provenance inside another's
    assert all("merged with" not in s for s in (stored.source, *stored.earlier_sources))
    again = CompletionTable.from_json(json.loads(json.dumps(stored.to_json())))
    assert again.source == stored.source and again.earlier_sources == stored.earlier_sources


def test_observed_calls_scale_the_expected_eta_and_never_lower_the_upper_bound(rates, tmp_path):
    run, model_id = make_run(tmp_path, {"ikea": {"llm_max_tokens": 64}})
    record = json.loads((run / "cells" / "c0.json").read_text())
    # the cell sent 2 of its 4 queries and made 3 attacker calls (1.5 per query; 2 declared)
    record.update(status="ok", counts={"queries": 2}, calls_by_role={"attacker": {"model_calls": 2, "cache_hits": 1}})
    record["spec"]["budget"] = 4
    (run / "cells" / "c0.json").write_text(json.dumps(record))
    cache = GenerationCache(run / "generations.sqlite")
    put(cache, model_id, "prompt of ikea", 256, 30)
    put(cache, model_id, "an agent's prompt", 64, 12, prompt_tokens=200)
    cache.close()
    observed = observe(run)
    row = observed.calls["ikea"].row()
    assert {k: row[k] for k in ("attack", "cells", "queries_share", "attacker_per_query")} == {
        "attack": "ikea", "cells": 1, "queries_share": 0.5, "attacker_per_query": 1.5}
    assert [(c["budget"], c["sent"]) for c in row["sent"]] == [(4, 2)]
    config = GridConfig(attacks=["ikea"], defenses=["none"], budget=4, attack_params={"ikea": {"llm_max_tokens": 64}},
                        **CORPUS)
    count = PromptTokenCounter(tmp_path / "t.json", count=words)
    stack_prompt = prompt_of(config, count)
    plan = plan_summary(config, completions=observed, tokens=count)
    target = stack_prompt / PREFILL + 30 / DECODE
    attacker = 200 / PREFILL + 12 / DECODE
    # expected: 2 of 4 queries sent, 1.5 attacker calls each; upper: all 4, at the declared 2
    assert plan["eta_s"] == round(2 * target + 3 * attacker)
    assert plan["eta_upper_s"] == round(4 * (stack_prompt / PREFILL + 256 / DECODE) + 8 * (200 / PREFILL + 64 / DECODE))
    assert plan["model_calls"] == 4 * 3 and plan["model_calls_expected"] == 2 + 3
    assert plan["eta_basis"]["completions"]["calls_used"]["ikea"]["queries_share"] == 0.5


def test_the_prefix_reuse_mode_prices_only_what_a_turn_does_not_share(rates, tmp_path):
    count = PromptTokenCounter(tmp_path / "t.json", count=words)
    reuse = {"decoding": {"reuse_prefix": True}}
    for mode, history in (("single", 0.0), ("multi", 2 / 3)):
        config = GridConfig(attacks=["ps"], defenses=["none"], modes=[mode], budget=3, stack=reuse, **CORPUS)
        counted = count("synthetic-corp", config.corpus_params["synthetic-corp"], config.stack)
        assert 0 < counted.system_tokens < counted.frame_tokens
        # every call keeps the system message of the call before; a turn after a conversation's
        # first re-prefills only the exchange before it (2 of 3 turns)
        prompt = counted.prompt - counted.system_tokens + history * (QUERY_WORDS * TOKENS_PER_WORD + 20)
        plan = plan_summary(config, completions=table(ps=[20]), tokens=count)
        assert plan["eta_s"] == round(3 * (prompt / PREFILL + 20 / DECODE))
        # the upper bound reuses nothing
        one_shot = GridConfig(attacks=["ps"], defenses=["none"], modes=[mode], budget=3, **CORPUS)
        assert plan["eta_upper_s"] == plan_summary(one_shot, completions=table(ps=[20]), tokens=count)["eta_upper_s"]


def test_a_likelihood_pass_is_a_model_call_priced_at_its_prefill(rates, tmp_path):
    params = {"asymmetry": {"standard_max_tokens": 40}}
    count = PromptTokenCounter(tmp_path / "t.json", count=words)
    plans = {scorer: plan_summary(GridConfig(attacks=["asymmetry"], defenses=["none"], budget=2,
                                             attack_params={"asymmetry": {**params["asymmetry"], "scorer": scorer}},
                                             **CORPUS), completions=table(asymmetry=[20]), tokens=count)
             for scorer in ("surprisal", "cosine")}
    frame = count("synthetic-corp", CORPUS["corpus_params"]["synthetic-corp"], StackConfig()).frame_tokens
    # per query: a target generation, a standard answer, and for surprisal a pass per answer
    # sentence (a 20-token answer: one; the count of model calls is at the 256-token cap)
    at_cap = 256 / TOKENS_PER_SENTENCE
    assert (plans["surprisal"]["model_calls"], plans["cosine"]["model_calls"]) == (round(4 + 2 * at_cap), 4)
    assert plans["surprisal"]["model_calls_expected"] - plans["cosine"]["model_calls_expected"] == 2
    # each pass prefills the standard prompt and its sentence (both ETAs are rounded to the second)
    assert abs(plans["surprisal"]["eta_s"] - plans["cosine"]["eta_s"] - 2 * (frame + 20) / PREFILL) <= 1
    assert abs(plans["surprisal"]["eta_upper_s"] - plans["cosine"]["eta_upper_s"]
               - 2 * (at_cap * frame + 256) / PREFILL) <= 1


def test_observe_counts_a_standard_llms_calls_as_the_attacks_own_and_skips_likelihoods(tmp_path):
    run, model_id = make_run(tmp_path, {"asymmetry": {"standard_max_tokens": 48}})
    record = json.loads((run / "cells" / "c0.json").read_text())
    # 4 queries: 4 standard answers and 4 likelihood passes (standard role), 2 writer calls
    record.update(status="ok", counts={"queries": 4},
                  calls_by_role={"target": {"model_calls": 4}, "standard": {"model_calls": 8, "cache_hits": 0},
                                 "attacker": {"model_calls": 2, "cache_hits": 0}})
    (run / "cells" / "c0.json").write_text(json.dumps(record))
    cache = GenerationCache(run / "generations.sqlite")
    put(cache, model_id, "a standard answer", 48, 30)
    cache.put("lk", model_id, DecodingParams(max_tokens=48), "a prompt\x00an answer",
              Generation(text="[]", prompt_tokens=0, completion_tokens=7, finish_reason="likelihood", seconds=0.1))
    cache.close()
    observed = observe(run)
    assert observed.calls["asymmetry"].attacker_per_query == 2.5
    assert observed.get("asymmetry", "attacker", MODEL).n == 1 and observed.unattributed == 0


def test_the_workers_eta_schedules_the_streams_at_the_rates_of_models_running_at_once(rates, tmp_path):
    config = GridConfig(attacks=["ps"], defenses=["none", "pad", "dp-retrieval"], epsilons=[1.0, 5.0], budget=3,
                        **CORPUS)
    count = PromptTokenCounter(tmp_path / "t.json", count=words)
    prompt = prompt_of(config, count)
    answers = table(ps=[40])
    one = plan_summary(config, completions=answers, tokens=count)
    assert one["workers_eta"]["workers"] == 1 and one["workers_eta"]["eta_s"] == one["eta_s"]
    # no rates of two models at once: no two-worker ETA, and the hint says how to get one
    two = plan_summary(config, completions=answers, tokens=count, workers=2)
    assert two["workers_eta"]["eta_s"] is None and "--workers 2" in two["workers_eta"]["hint"]
    assert two["eta_s"] == one["eta_s"]  # the one-worker ETA stays as it was
    # each of two copies at half the rates: 3 streams (none+pad share one; dp-retrieval per epsilon),
    # each 3 queries; on 2 workers the makespan is two streams' time
    save_speed(MODEL, {"threads": 1, "copies": 2, "prefill_tok_s": PREFILL / 2, "decode_tok_s": DECODE / 2})
    two = plan_summary(config, completions=answers, tokens=count, workers=2)
    stream = 3 * (prompt / (PREFILL / 2) + 40 / (DECODE / 2))
    assert two["distinct_generation_streams"] == 3
    assert two["workers_eta"]["eta_s"] == round(2 * stream)
    assert two["workers_eta"]["rates"][f"{MODEL}@1x2"]["prefill_tok_s"] == PREFILL / 2
    # two copies measured faster than one alone (separate timings): capped at the one-copy rate
    save_speed(MODEL, {"threads": 1, "copies": 2, "prefill_tok_s": PREFILL * 1.05, "decode_tok_s": DECODE / 2})
    two = plan_summary(config, completions=answers, tokens=count, workers=2)
    assert two["workers_eta"]["eta_s"] == round(2 * 3 * (prompt / PREFILL + 40 / (DECODE / 2)))
    assert two["workers_eta"]["rates"][f"{MODEL}@1x2"]["capped_at_one_copy"] == ["prefill_tok_s"]


def test_an_agents_repeated_prompts_are_not_priced_as_calls():
    # 4 queries; the agent sent 6 prompts, 2 of them again (cache hits on its own keys): 4 distinct,
    # 1 per query; a hit on another cell's entry still counts (a plan does not promise it)
    cells = [{"spec": {"attack": "ikea", "budget": 4}, "status": "ok", "counts": {"queries": 4},
              "calls_by_role": {"attacker": {"model_calls": 3, "cache_hits": 3, "cache_repeats": 2}}}]
    assert attack_calls(cells)["ikea"].attacker_per_query == 1.0


def test_an_attack_that_ends_on_its_own_is_priced_at_where_it_ended_under_any_larger_budget():
    # IKEA at its default budget (None in the spec, 256 in the counts) sent 12 on one corpus; at
    # budget 8 it used all 8 on another, which says nothing past 8
    cells = [{"spec": {"attack": "ikea", "budget": None, "corpus": "qa", "versions": {"attack:ikea": "1"}},
              "status": "ok", "counts": {"queries": 12, "budget": 256}, "calls_by_role": {}},
             {"spec": {"attack": "ikea", "budget": 8, "corpus": "mail"}, "status": "ok",
              "counts": {"queries": 8}, "calls_by_role": {}}]
    calls = attack_calls(cells)["ikea"]
    assert calls.version == "1" and len(calls.sent) == 2
    assert calls.expected_queries(256, "qa") == (12.0, "1 cell(s) on qa")
    assert calls.expected_queries(5, "qa")[0] == 5.0
    assert calls.expected_queries(256, "mail")[0] == 256.0
    assert calls.expected_queries(100, "elsewhere") == ((12 + 100) / 2, "2 cell(s) on other corpora")
    again = CompletionTable.from_json(CompletionTable({}, "t", calls={"ikea": calls}).to_json()).calls["ikea"]
    assert again == calls


def test_calls_observed_on_another_attack_version_are_not_used(rates, tmp_path):
    from ragleak.grid.completions import AttackCalls, SentQueries

    config = GridConfig(attacks=["ikea"], defenses=["none"], budget=64, **CORPUS)
    count = PromptTokenCounter(tmp_path / "t.json", count=words)
    stopped = (SentQueries(CORPUS["corpora"][0], 256, 4),)

    def plan(version):
        table = CompletionTable({}, "t", calls={"ikea": AttackCalls("ikea", 1, 1.0, 2.0, stopped, version)})
        return plan_summary(config, completions=table, tokens=count)

    same, other = plan("1"), plan("0-old")
    assert same["eta_s"] < other["eta_s"]
    assert same["model_calls_expected"] < other["model_calls_expected"]
    assert other["eta_basis"]["completions"]["calls_of_another_attack_version"] == {
        "ikea": {"observed": "0-old", "installed": "1"}}
    assert same["eta_basis"]["completions"]["queries_sent"] == {
        "ikea": {"streams": 1, "budgeted": 64, "expected": 4.0, "from": ["1 cell(s) on synthetic-corp"]}}
    assert not other["eta_basis"]["completions"]["queries_sent"]


def test_a_partial_cell_does_not_say_where_an_attack_ends():
    # it may have stopped on its failed queries: its sent count is no stopping point
    cells = [{"spec": {"attack": "ikea", "budget": 256, "corpus": "qa"}, "status": "partial",
              "counts": {"queries": 5, "errors": 2}, "calls_by_role": {}}]
    calls = attack_calls(cells)["ikea"]
    assert calls.sent == () and calls.queries_share is None and calls.expected_queries(256, "qa")[0] == 256


def test_target_repeats_are_priced_only_where_a_repeated_query_is_the_same_prompt(rates, tmp_path):
    from ragleak.grid.completions import AttackCalls, generation_prompts_repeat

    # RAG-Thief re-sends queries; under no defense in single prompts a repeat is a cache hit
    cells = [{"spec": {"attack": "rag-thief", "budget": 10, "corpus": "qa", "defense": "none", "mode": "single"},
              "status": "ok", "counts": {"queries": 10},
              "calls_by_role": {"target": {"model_calls": 4, "cache_hits": 6, "cache_repeats": 6}}},
             {"spec": {"attack": "rag-thief", "budget": 10, "corpus": "qa", "defense": "dp-retrieval", "mode": "single"},
              "status": "ok", "counts": {"queries": 10},
              "calls_by_role": {"target": {"model_calls": 10, "cache_hits": 0, "cache_repeats": 0}}}]
    assert attack_calls(cells)["rag-thief"].target_repeat_share == 0.6  # the dp-retrieval cell is not evidence
    assert generation_prompts_repeat("pad-regex", carries_answers=False)
    assert not generation_prompts_repeat("dp-retrieval", False) and not generation_prompts_repeat("none", True)
    config = GridConfig(attacks=["rag-thief"], defenses=["none", "dp-retrieval"], modes=["single", "multi"],
                        budget=10, **CORPUS)
    table = CompletionTable({}, "t", calls={"rag-thief": AttackCalls("rag-thief", 1, 1.0, 0.0, target_repeat_share=0.6)})
    count = PromptTokenCounter(tmp_path / "t.json", count=words)
    credited = plan_summary(config, completions=table, tokens=count)["model_calls_expected"]
    none_single = config.model_copy(update={"defenses": ["none"], "modes": ["single"]})
    alone = plan_summary(none_single, completions=table, tokens=count)["model_calls_expected"]
    # 4 streams of 10 queries: only none/single is credited (4 calls instead of 10)
    assert (credited, alone) == (34, 4)


def test_bare_repeats_are_observed_in_context_budget_cells_and_priced_for_bare_questions(rates, tmp_path):
    from ragleak.grid.completions import AttackCalls

    # ca-dp at eps 1 gives passages to 1 query of 10: its noisy prompt never repeats, so the 6
    # repeats are among the 9 bare questions; a dp-retrieval cell (no context budget) says nothing
    cells = [{"spec": {"attack": "rag-thief", "budget": 10, "corpus": "qa", "defense": "ca-dp", "epsilon": 1.0,
                       "defense_params": {"turn_epsilon": 1.0}, "mode": "single"},
              "status": "ok", "counts": {"queries": 10},
              "calls_by_role": {"target": {"model_calls": 4, "cache_hits": 6, "cache_repeats": 6}}},
             {"spec": {"attack": "rag-thief", "budget": 10, "corpus": "qa", "defense": "dp-retrieval", "epsilon": 1.0,
                       "mode": "single"}, "status": "ok", "counts": {"queries": 10},
              "calls_by_role": {"target": {"model_calls": 10, "cache_hits": 0, "cache_repeats": 0}}}]
    calls = attack_calls(cells)["rag-thief"]
    assert calls.bare_repeat_share == round(6 / 9, 3) and calls.target_repeat_share is None
    config = GridConfig(attacks=["rag-thief"], defenses=["ca-dp"], epsilons=[1.0], budget=10,
                        defense_params={"ca-dp": {"turn_epsilon": 1.0}}, **CORPUS)
    count = PromptTokenCounter(tmp_path / "t.json", count=words)

    def bare_generations(**shares) -> float:
        table = CompletionTable({}, "t", calls={"rag-thief": AttackCalls("rag-thief", 1, 1.0, 0.0, **shares)})
        return plan_summary(config, completions=table, tokens=count)["eta_basis"]["context_budget"]["ca-dp"]["bare"]

    # 9 bare questions: the bare share where observed, else the share of repeated queries, else none
    assert bare_generations() == 9
    assert bare_generations(target_repeat_share=0.5) == 4.5
    assert bare_generations(target_repeat_share=0.5, bare_repeat_share=0.7) == pytest.approx(2.7)


def test_a_cells_own_defense_epsilon_wins_over_the_grid_axis_when_its_bare_questions_are_counted():
    # ca-dp told conversation_epsilon 5 in its params runs at 5 whatever the grid's epsilon
    # (``CellSpec.epsilon_param``): 5 queries get passages, so 3 repeats are among 5 bare questions
    spec = {"attack": "rag-thief", "budget": 10, "corpus": "qa", "defense": "ca-dp", "epsilon": 1.0,
            "defense_params": {"turn_epsilon": 1.0, "conversation_epsilon": 5.0}, "mode": "single"}
    cells = [{"spec": spec, "status": "ok", "counts": {"queries": 10},
              "calls_by_role": {"target": {"model_calls": 7, "cache_hits": 3, "cache_repeats": 3}}}]
    assert attack_calls(cells)["rag-thief"].bare_repeat_share == round(3 / 5, 3)


@pytest.mark.parametrize("mode, bare", [("single", 9 + 0), ("multi", 9 + 1)])
def test_a_fixed_attacks_bare_turns_no_passage_reaches_are_paid_once_across_epsilons(rates, tmp_path, mode, bare):
    # ca-dp gives passages to 1 query at eps 1 and 5 at eps 5; of 10 PS queries the eps-1 cell asks
    # 9 bare. In single prompts the eps-5 cell's 5 bare ones are among them; in conversations of
    # 3 turns its query 5 carries the answers of queries 3-4 (given passages), so it is its own,
    # and from query 6 (a conversation begun bare) on both cells send the same prompts
    config = GridConfig(attacks=["ps"], defenses=["ca-dp"], epsilons=[1.0, 5.0], modes=[mode], budget=10,
                        defense_params={"ca-dp": {"turn_epsilon": 1.0}}, **CORPUS)
    count = PromptTokenCounter(tmp_path / "t.json", count=words)
    used = plan_summary(config, completions=CompletionTable({}, "t"), tokens=count)["eta_basis"]["context_budget"]
    assert used["ca-dp"] == {"streams": 2, "with_context": 6, "bare": bare}


def test_answers_under_a_defense_that_changes_what_the_model_reads_are_priced_as_observed_there(rates, tmp_path):
    run, model_id = make_run(tmp_path, {"ps": {}})
    # a second cell of the same attack under dp-retrieval, and one under pad-regex (postprocess only)
    for name, defense, prompt in (("c1", "dp-retrieval", "noisy passages"), ("c2", "pad-regex", "masked later")):
        spec = {"attack": "ps", "defense": defense, "mode": "single", "stack": StackConfig().model_dump(mode="json")}
        (run / "cells" / f"{name}.json").write_text(json.dumps({"cell_id": name, "spec": spec}))
        (run / "transcripts" / f"{name}.json").write_text(json.dumps({"attack": "ps", "queries": [{"trace": {"prompt": prompt}}]}))
    cache = GenerationCache(run / "generations.sqlite")
    put(cache, model_id, "prompt of ps", 256, 20)
    put(cache, model_id, "noisy passages", 256, 200)
    put(cache, model_id, "masked later", 256, 30)
    cache.close()
    observed = observe(run)
    assert observed.get("ps", "target", MODEL).n == 3  # every answer counts for the attack
    assert set(observed.under) == {("dp-retrieval", "ps", MODEL)}
    assert observed.target_under("dp-retrieval", "ps", MODEL).completion_mean == 200.0
    assert CompletionTable.from_json(observed.to_json()).under == observed.under
    config = GridConfig(attacks=["ps"], defenses=["none", "dp-retrieval"], budget=2, **CORPUS)
    basis = plan_summary(config, completions=observed, tokens=_COUNT)["eta_basis"]["completions"]["used"]
    assert basis[f"ps/target/{MODEL} under dp-retrieval"]["mean"] == 200.0
    assert basis[f"ps/target/{MODEL}"]["mean"] == 83.3


def test_observe_tells_bare_answers_from_answers_with_passages(tmp_path):
    run, model_id = make_run(tmp_path, {"ps": {}})
    (run / "transcripts" / "c0.json").write_text(json.dumps({"attack": "ps", "queries": [
        {"trace": {"prompt": "with passages", "context": [{"id": "d#0"}]}},
        {"trace": {"prompt": "bare question", "context": []}},
        # a conversation's later bare turn carries its history: a bare answer, its prompt no
        # measure of the question
        {"turn": 1, "trace": {"prompt": "history and a bare question", "context": []}}]}))
    cache = GenerationCache(run / "generations.sqlite")
    put(cache, model_id, "with passages", 256, 40)
    put(cache, model_id, "bare question", 256, 8, prompt_tokens=30)
    put(cache, model_id, "history and a bare question", 256, 12, prompt_tokens=300)
    cache.close()
    observed = observe(run)
    assert observed.get("ps", "target", MODEL).completion_median == 40.0
    bare = observed.get("ps", "bare", MODEL)
    assert (bare.n, bare.completion_median, bare.prompt_median) == (2, 10.0, 30.0)
    assert observed.unattributed == 0


def test_bare_answers_are_priced_at_their_observed_length_else_at_the_attacks_answers(rates, tmp_path):
    config = GridConfig(attacks=["ps"], defenses=["ca-dp"], epsilons=[1.0], budget=4,
                        defense_params={"ca-dp": {"turn_epsilon": 1.0}}, **CORPUS)
    tokens = _COUNT("synthetic-corp", {"n_docs": 12}, config.stack)
    target = {("ps", "target", MODEL): [(40, 50, False)]}
    unobserved = plan_summary(config, completions=summarise(target, "t"), tokens=_COUNT)
    observed = plan_summary(config, completions=summarise({**target, ("ps", "bare", MODEL): [(8, 9, False)]}, "t"),
                            tokens=_COUNT)
    speed = unobserved["eta_basis"]["rates"][f"{MODEL}@1"]
    prefill, decode = speed["prefill_tok_s"], speed["decode_tok_s"]
    # one query with passages (budget eps 1 at eps 1 a query), then three bare questions
    first = tokens.prompt / prefill + 40 / decode
    assert unobserved["eta_s"] == round(first + 3 * (tokens.frame_tokens / prefill + 40 / decode))
    assert unobserved["eta_basis"]["completions"]["bare_unobserved_as_target"] == [f"ps/bare/{MODEL}"]
    # observed: the bare prompts' own length too (9 tokens here; an MI probe quotes a document)
    assert observed["eta_s"] == round(first + 3 * (9 / prefill + 8 / decode))
    assert observed["eta_basis"]["completions"]["bare_unobserved_as_target"] == []
    # only later conversation turns observed: their answers count, their prompts (history) do not
    later = summarise({**target, ("ps", "bare", MODEL): [(8, None, False)]}, "t")
    assert later.get("ps", "bare", MODEL).prompt_median is None
    assert plan_summary(config, completions=later, tokens=_COUNT)["eta_s"] == round(
        first + 3 * (tokens.frame_tokens / prefill + 8 / decode))


def test_an_attacks_observed_bare_prompts_size_its_questions_in_every_prompt(rates):
    config = GridConfig(attacks=["mi"], defenses=["none"], budget=4,
                        attack_params={"mi": {"scorers": ["heuristic"], "n_members": 2, "n_nonmembers": 2,
                                              "kb_size": 6}}, **CORPUS)
    tokens = _COUNT("synthetic-corp", {"n_docs": 12}, config.stack)
    target = {("mi", "target", MODEL): [(40, 50, False)]}
    plain = plan_summary(config, completions=summarise(target, "t"), tokens=_COUNT)
    quoted = {**target, ("mi", "bare", MODEL): [(8, tokens.frame_tokens + 100, False)]}
    longer = plan_summary(config, completions=summarise(quoted, "t"), tokens=_COUNT)
    prefill = plain["eta_basis"]["rates"][f"{MODEL}@1"]["prefill_tok_s"]
    # an MI probe quotes half a document: 100 tokens beyond the frame's question, in each of 4 prompts
    assert longer["eta_s"] - plain["eta_s"] == pytest.approx(4 * 100 / prefill, abs=1)
    assert longer["eta_basis"]["completions"]["question_tokens_beyond_frame"] == {f"mi/{MODEL}": 100.0}
    assert longer["eta_upper_s"] - plain["eta_upper_s"] == pytest.approx(4 * 100 / prefill, abs=1)


def test_the_table_script_keeps_rows_under_a_defense_when_it_names_and_merges_a_run(tmp_path):
    import importlib.util

    from ragleak.grid.completions import CompletionStats

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "plan_completions.py"
    spec = importlib.util.spec_from_file_location("plan_completions", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    stats = CompletionStats("mi", "target", MODEL, 40, 17.5, 38.0, 818.0, 0.0)
    run = tmp_path / "run"
    run.mkdir()
    (run / "plan.json").write_text(json.dumps({"config": {"name": "mi under dp-retrieval"}}))
    named = script.named(CompletionTable({}, "observed", under={("dp-retrieval", "mi", MODEL): stats}), run)
    assert named.source == "grid run 'mi under dp-retrieval'" and named.under == {("dp-retrieval", "mi", MODEL): stats}
    shipped = {"target_under_defense": [{"defense": "lprag", **stats.row(), "from": "older"}]}
    merged = script.merge([named], shipped)["target_under_defense"]
    assert [(r["defense"], r["from"]) for r in merged] == [("dp-retrieval", "grid run 'mi under dp-retrieval'"),
                                                           ("lprag", "older")]
