"""Logic of Pirates of the RAG (Di Maio et al., ECAI 2025): the anchor loop's dedupe, penalties, stop
rule and reproducibility, with a scripted target and a scripted attacker LLM (never the default;
the embedder that decides duplicates is the stack's real MiniLM)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from ragleak.attacks import ATTACKS, make_attack
from ragleak.attacks.instructions import load_instructions
from ragleak.attacks.pirates import (COMMANDS, duplicate_penalty, novelty, parse_question, parse_topics,
                                     sample_anchors)
from ragleak.errors import ConfigError
from ragleak.pipeline.target import CallableTarget
from ragleak.testing import tiny_stack

RECORDS = {
    "harbour": "Orla Vance owes rent on the Kestrel harbour warehouse since the flood in March.",
    "invoice": "Tobias Renn approved the Larkspur invoice for forty telescopes and two tripods.",
    "clinic": "Dr Mina Osei moved the Willowbrook clinic appointments to the north wing on Fridays.",
    "orchard": "The Hollis orchard cooperative sold its cider press to Pavel Dunmore last autumn.",
    "ferry": "Captain Ines Sorel signed the ferry maintenance contract for the Brackwater crossing.",
    "quarry": "The Redfern quarry closed its east pit after Ada Kimura reported cracked blasting mats.",
}


def copy_commands(query: str) -> bool:
    return any(c in query for c in COMMANDS)


def keyword_target(query: str) -> str:
    """Copies the records whose key the query names (two at most), or the first two."""
    if not copy_commands(query):
        return "I cannot help with that."
    hits = [text for key, text in RECORDS.items() if key in query.lower()] or list(RECORDS.values())[:2]
    return "\n".join(f"Passage {i + 1}: {text}" for i, text in enumerate(hits[:2]))


def attacker(user: str) -> str:
    """Writes 'A note about <keywords>' and lists a chunk's capitalised words as its topics."""
    if "Keywords:" in user:
        return "Text: A note about " + user.rsplit("Keywords:", 1)[1].splitlines()[0].strip()
    chunk = user.rsplit("Text:", 1)[1]
    return ", ".join(w.strip(".,") for w in chunk.split() if w[:1].isupper())


def run(target, budget: int, seed: int = 0, script=attacker, **params):
    stack = tiny_stack(attacker=script)
    return make_attack("pirates", **params).run(CallableTarget(target), stack.context(seed), budget=budget)


def test_duplicates_penalise_the_anchors_until_all_are_dead_and_the_loop_stops():
    same = "\n".join(f"Passage {i + 1}: {t}" for i, t in enumerate(list(RECORDS.values())[:2]))
    t = run(lambda q: same if copy_commands(q) else "No.", budget=60)
    assert t.state["stop"] == "all anchors dead" and len(t.queries) < 60
    assert t.extracted == list(RECORDS.values())[:2]  # the repeats are never stolen twice
    first, later = t.state["rounds"][0], t.state["rounds"][1:]
    assert first["new"] == 2 and first["penalties"] == {} and "orla" in first["added"]
    assert later and all(r["new"] == 0 and r["chunks"] == 2 and r["penalties"] for r in later)
    # every duplicate chunk spreads one unit of blame over the anchors it was asked with, / 2 chunks
    assert all(abs(sum(r["penalties"].values()) - 1.0) < 1e-5 for r in later)
    assert t.state["alive_anchors"] == 0 and all(r <= 0.1 for r in t.state["anchors"].values())
    assert len(t.queries) == len(t.state["rounds"])  # the first command always copied


def test_commands_are_tried_in_turn_and_a_round_without_chunks_changes_nothing():
    picky = lambda q: keyword_target(q) if COMMANDS[2] in q else "Sorry."  # noqa: E731
    t = run(picky, budget=7, script=lambda user: "Text: A note about love" if "Keywords:" in user else "")
    assert [q.query.endswith(c) for q, c in zip(t.queries, COMMANDS[:3] * 2)] == [True] * 6
    assert t.state["rounds"][0]["command"] == 2 and t.state["rounds"][0]["queries"] == [0, 1, 2]
    assert t.state["stop"] == "all anchors dead" and len(t.queries) == 6  # round 2 only repeated round 1
    mute = run(lambda q: "Sorry.", budget=9)
    assert len(mute.queries) == 9 and mute.state["stop"] == "budget" and mute.extracted == []
    assert mute.state["anchors"] == {"love": 1.0}  # the paper penalises duplicates only, never silence
    assert all(r["command"] is None and r["queries"] == [i * 4 + j for j in range(len(r["queries"]))]
               for i, r in enumerate(mute.state["rounds"]))


def test_new_anchors_come_from_new_chunks_at_the_highest_relevance():
    t = run(keyword_target, budget=8, initial_anchors=("harbour",), anchors_per_query=2)
    anchors, first = t.state["anchors"], t.state["rounds"][0]
    assert {"orla", "vance", "kestrel"} <= set(first["added"])
    assert len(t.extracted) == len(set(t.extracted)) >= 2
    assert any(len(r["anchors"]) == 2 for r in t.state["rounds"][1:])  # more than one anchor alive
    assert max(anchors.values()) <= 1.0 and t.state["attacker_calls"] >= 2
    one = run(keyword_target, budget=1, initial_anchors=("harbour",))  # one round, one new chunk, no penalty
    assert len(one.state["anchors"]) > 4 and set(one.state["anchors"].values()) == {1.0}
    assert {"harbour", "kestrel", "orla"} <= set(one.state["anchors"])  # the start and the chunk's topics
    assert "what" not in one.state["anchors"]  # the script also lists the prompt's "What": not in the chunk


def test_the_same_seed_repeats_the_run_and_another_seed_does_not():
    kwargs = dict(budget=6, initial_anchors=tuple(RECORDS), anchors_per_query=1)
    a, b, c = run(keyword_target, seed=3, **kwargs), run(keyword_target, seed=3, **kwargs), \
        run(keyword_target, seed=4, **kwargs)
    assert [q.query for q in a.queries] == [q.query for q in b.queries] and a.state == b.state
    assert a.extracted == b.extracted
    assert [q.query for q in a.queries] != [q.query for q in c.queries]


def test_an_instruction_replaces_the_commands():
    reorder = load_instructions().instructions["reorder"]
    t = run(lambda q: "Sorry.", budget=3, instruction="reorder")
    assert [q.query.endswith(reorder) for q in t.queries] == [True] * 3 and t.state["commands"] == 1
    with pytest.raises(ConfigError, match="unknown instruction"):
        make_attack("pirates", instruction="shout")
    with pytest.raises(ConfigError, match="dead_below"):
        make_attack("pirates", beta=0.05)
    assert "pirates" in ATTACKS.names() and ATTACKS.get("pirates").adaptive


def test_penalty_novelty_and_sampling_by_hand():
    e = np.eye(3)
    pen = duplicate_penalty(e[[0]], e[[0, 1]], n_chunks=2, temperature=0.4)
    share = np.exp(1 / 0.4) / (np.exp(1 / 0.4) + 1)
    assert np.allclose(pen, [share / 2, (1 - share) / 2])
    assert np.allclose(duplicate_penalty(np.zeros((0, 3)), e[[0, 1]], 2, 0.4), [0, 0])
    near = np.array([0.999, 0.0447, 0.0]) / np.linalg.norm([0.999, 0.0447, 0.0])
    assert novelty(np.vstack([e[0], near, e[1]]), np.zeros((0, 3)), 0.95) == [True, False, True]
    assert novelty(np.vstack([e[0], e[2]]), e[[2]], 0.95) == [True, False]
    relevance = {"dead": 0.1, "low": 0.2, "high": 1.0}
    picks = [sample_anchors(relevance, 1, 0.15, 0.1, random.Random(i))[0] for i in range(200)]
    assert "dead" not in picks and picks.count("high") > 190  # softmax(R / 0.15): e^{-5.3} odds for "low"
    assert sorted(sample_anchors(relevance, 5, 0.15, 0.1, random.Random(0))) == ["high", "low"]
    assert sample_anchors({"x": 0.05}, 3, 0.15, 0.1, random.Random(0)) == []


def test_parsers_read_labels_lists_and_free_text():
    assert parse_question('Expected output: "Storm over the harbour."\nmore', 30) == "Storm over the harbour."
    assert parse_question("one two three four five", 3) == "one two three"
    assert parse_topics("Topics: Harbour, Orla Vance, harbour.\n- Kestrel") == ["harbour", "orla vance", "kestrel"]
    assert parse_topics("") == []
