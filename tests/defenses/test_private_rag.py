"""private-rag: per-document filters (charge, retire, cap M*eps_q), the per-token exponential
mechanism within its epsilon, and the real stack changing exactly the declared hooks."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragleak.accounting import epsilon_after, log_ratio_interval
from ragleak.defenses import make_defense
from ragleak.defenses.dp_select import noisy_argmax
from ragleak.defenses.private_rag import PrivateRAG
from ragleak.records import Passage, Scored
from ragleak.testing import pipeline_under_test

N = 40_000


def _frequencies(counts, eps, seed):
    rng = np.random.default_rng(seed)
    return Counter(noisy_argmax(counts, eps, rng) for _ in range(N))


@pytest.mark.parametrize("a, b", [
    ([2.5, 1.0, 0.0, 0.0], [1.5, 2.0, 0.0, 0.0]),   # one voter changes its vote
    ([1.5, 1.0, 0.0, 0.0], [0.5, 1.0, 0.0, 0.0]),   # one voter abstains (its document removed)
])
@pytest.mark.parametrize("eps", [1.0, 2.0])
def test_token_release_loss_is_within_eps(a, b, eps):
    fa, fb = _frequencies(a, eps, 1), _frequencies(b, eps, 2)
    losses = [log_ratio_interval(fa[k], N, fb[k], N) for k in fa if fa[k] >= 300 and fb[k] >= 300]
    losses += [log_ratio_interval(fb[k], N, fa[k], N) for k in fa if fa[k] >= 300 and fb[k] >= 300]
    assert all(low <= eps for _, low, _ in losses)
    assert max(est for est, _, _ in losses) > 0.25 * eps


def _cands(scores, prefix="d"):
    return [Scored(passage=Passage(id=f"{prefix}{i}#0", doc_id=f"{prefix}{i}", text=f"t{i}"), score=s)
            for i, s in enumerate(scores)]


def test_relevant_documents_are_charged_and_retire_after_M_uses():
    d = PrivateRAG(eps_q=1.0, max_charges=2, tau=0.3, voters=2)
    cands = _cands([0.9, 0.8, 0.5, 0.2, 0.1])
    first = d.score_retrieval("q", cands)
    assert [c.passage.doc_id for c in first] == ["d0", "d1"]      # top-k of the relevant set
    assert d.log[-1].relevant == 3 and d.log[-1].charged == 3     # d2 charged although not used
    d.score_retrieval("q", cands)
    assert d.filter.retired() == ["d0", "d1", "d2"]
    third = d.score_retrieval("q", cands)
    assert third == [] and d.log[-1].charged == 0                 # retired documents are never touched
    assert d.filter.spent("d3") == 0.0


def test_a_document_below_tau_changes_nothing():
    with_z, without_z = PrivateRAG(tau=0.3), PrivateRAG(tau=0.3)
    base = _cands([0.9, 0.6, 0.1])
    z = Scored(passage=Passage(id="z#0", doc_id="z", text="zzz"), score=0.25)
    assert with_z.score_retrieval("q", base + [z]) == without_z.score_retrieval("q", base)
    assert with_z.filter.spent("z") == 0.0


def test_one_passage_per_document_votes():
    d = PrivateRAG(tau=0.3, voters=3)
    cands = [Scored(passage=Passage(id=f"a#{i}", doc_id="a", text=f"a{i}"), score=0.9 - i * 0.1) for i in range(3)]
    out = d.score_retrieval("q", cands + _cands([0.5]))
    assert [c.passage.id for c in out] == ["a#0", "d0#0"]


@settings(max_examples=30, deadline=None)
@given(stream=st.lists(st.lists(st.floats(min_value=0.0, max_value=1.0), min_size=5, max_size=5), min_size=1, max_size=40),
       m=st.integers(min_value=1, max_value=4))
def test_no_document_ever_spends_more_than_M_eps_q(stream, m):
    d = PrivateRAG(eps_q=0.7, max_charges=m, tau=0.4)
    for scores in stream:
        d.score_retrieval("q", _cands(scores))
    assert d.filter.max_spent() <= m * 0.7 + 1e-12
    g = d.guarantee()
    assert epsilon_after(g, len(stream)).eps <= m * 0.7 + 1e-12


def test_guarantee_is_a_per_document_filter_on_answers():
    g = make_defense("private-rag", eps_q=5.0, max_charges=3).guarantee()
    assert g.scope.kind == "per-document-filter"
    assert [epsilon_after(g, t).eps for t in (1, 10, 1000)] == [5.0, 15.0, 15.0]
    assert epsilon_after(g, 10, shown="answers+citations").void  # deterministic retrieval, citations shown


@pytest.mark.model
def test_on_the_real_stack_score_and_generate_change(fact_index, generator):
    d = PrivateRAG(max_new_tokens=6)
    pipe = pipeline_under_test(fact_index, generator, d, top_k=3, seed=5)
    trace = pipe.answer("Who founded the Halvorsen Foundry?").trace
    changed = {h.hook: h.changed for h in trace.hooks}
    assert changed == {"score_retrieval": True, "rewrite_context": False, "generate": True, "postprocess": False}
    assert trace.retrieved_ids == ["foundry"]           # the only document above tau
    log = d.log[-1]
    assert log.t == 1 and log.active_docs == len(fact_index.doc_ids) and log.real_voters == 1 and log.tokens >= 1
    assert d.filter.spent("foundry") == d.params.eps_q
