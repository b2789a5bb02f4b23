"""The budget ledger: charges capped, durable the moment ``charge`` returns (also across kill -9),
bound to the terms they were made under, and copied (not shared) by an in-memory ledger."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest

from ragleak.context import RunContext
from ragleak.defenses.budget_store import Ledger, budgets_beside
from ragleak.defenses.ca_dp import CompositionAwareDP
from ragleak.defenses.private_rag import PrivateRAG
from ragleak.errors import ConfigError
from ragleak.records import Passage, Scored

TERMS = {"eps": 1.0}


def test_charges_stop_at_the_cap_and_survive_reopening(tmp_path):
    path = tmp_path / "b.sqlite"
    ledger = Ledger(path, "ca-dp", TERMS)
    assert [ledger.charge(["alice"], 2) for _ in range(3)] == [["alice"], ["alice"], []]
    assert ledger.charge(["bob", "alice", "bob"], 2) == ["bob"]  # each distinct key once per call
    ledger.close()
    again = Ledger(path, "ca-dp", TERMS)
    assert again.counts() == {"alice": 2, "bob": 1}
    assert Ledger(path, "private-rag", {"eps_q": 1}).counts() == {}  # namespaces do not mix


def test_two_ledgers_on_one_file_never_exceed_the_cap(tmp_path):
    # two servers sharing the file: each charge re-reads the stored count inside its transaction
    a, b = Ledger(tmp_path / "b.sqlite", "ca-dp", TERMS), Ledger(tmp_path / "b.sqlite", "ca-dp", TERMS)
    paid = [bool((a if i % 2 else b).charge(["k"], 3)) for i in range(8)]
    assert sum(paid) == 3 and a.count("k") == 3


def test_other_terms_are_refused_not_reset(tmp_path):
    path = tmp_path / "b.sqlite"
    Ledger(path, "ca-dp", TERMS).charge(["alice"], 5)
    with pytest.raises(ConfigError, match="other terms"):
        Ledger(path, "ca-dp", {"eps": 0.5})
    assert Ledger(path, "ca-dp", TERMS).count("alice") == 1


def test_a_file_that_is_not_a_database_is_a_clear_error(tmp_path):
    bad = tmp_path / "b.sqlite"
    bad.write_text("not sqlite " * 100)
    with pytest.raises(ConfigError, match="cannot open the budget store"):
        Ledger(bad, "ca-dp", TERMS)


def test_a_charge_is_on_disk_when_it_returns_even_under_kill_9(tmp_path):
    path = tmp_path / "b.sqlite"
    code = ("import os, signal, sys; from ragleak.defenses.budget_store import Ledger; "
            f"l = Ledger(sys.argv[1], 'ca-dp', {TERMS!r}); l.charge(['alice'], 9); l.charge(['alice'], 9); "
            "os.kill(os.getpid(), signal.SIGKILL)")
    run = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, timeout=60)
    assert run.returncode == -9, run.stderr
    assert Ledger(path, "ca-dp", TERMS).count("alice") == 2


def test_an_in_memory_ledger_is_copied_with_its_counts():
    ledger = Ledger(None, "ca-dp", TERMS)
    ledger.charge(["a"], 5)
    twin = copy.deepcopy(ledger)
    twin.charge(["a"], 5)
    assert (ledger.count("a"), twin.count("a")) == (1, 2) and twin.location == "memory"


def test_budgets_live_beside_the_index_not_inside_it(tmp_path):
    assert budgets_beside(tmp_path / "idx") == tmp_path / "idx.budgets.sqlite"


def test_ca_dp_charges_before_retrieval_and_a_restarted_defense_continues(tmp_path, fact_index):
    path = tmp_path / "b.sqlite"
    first = CompositionAwareDP(turn_epsilon=1.0, conversation_epsilon=2.0, accountant="basic")
    first.prepare(RunContext(seed=1, budgets=path))
    first.begin_query(fact_index, [], principal="alice")  # paid here, before any retrieval or answer
    del first  # the process "dies" before answering
    second = CompositionAwareDP(turn_epsilon=1.0, conversation_epsilon=2.0, accountant="basic")
    second.prepare(RunContext(seed=1, budgets=path))
    second.begin_query(fact_index, [], principal="alice")
    assert second.charged == {"alice": 2} and not second._refuse
    second.begin_query(fact_index, [], principal="alice")
    assert second._refuse and second.refused_turns == 1
    card_scope = second.guarantee().scope
    assert card_scope.ledger == str(path)
    with pytest.raises(ConfigError, match="other terms"):  # a changed budget never resets the charges
        CompositionAwareDP(turn_epsilon=1.0, conversation_epsilon=3.0, accountant="basic").prepare(
            RunContext(budgets=path))


def test_private_rag_document_charges_survive_a_restart(tmp_path):
    path = tmp_path / "b.sqlite"
    cands = [Scored(passage=Passage(id=f"d{i}#0", doc_id=f"d{i}", text=f"t{i}"), score=s)
             for i, s in enumerate([0.9, 0.8, 0.1])]
    first = PrivateRAG(eps_q=1.0, max_charges=2, tau=0.3, voters=2)
    first.prepare(RunContext(budgets=path))
    assert [c.passage.doc_id for c in first.score_retrieval("q", cands)] == ["d0", "d1"]
    second = PrivateRAG(eps_q=1.0, max_charges=2, tau=0.3, voters=2)
    second.prepare(RunContext(budgets=path))
    assert second.filter.spent("d0") == 1.0
    second.score_retrieval("q", cands)
    assert second.score_retrieval("q", cands) == [] and second.filter.retired() == ["d0", "d1"]
    assert second.guarantee().scope.ledger == str(path)

