"""Issue 14's accounting: a violated assumption voids the claim, a passage-level proof pays group
privacy over the chunks per document, citations next to an answers claim add the selection's
epsilon, and a per-principal budget does not cap the worst case."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragleak.accounting import build_card, epsilon_after
from ragleak.accounting.composition import void_reason
from ragleak.accounting.guarantee import Assumption, Guarantee, PerDocumentFilter, PerResponse, PersonUnit

EPS = st.floats(min_value=0.05, max_value=3.0, allow_nan=False)
T = st.integers(min_value=1, max_value=200)


def _per_response(eps, mechanism="exponential", **kw):
    noise = 1.0 / eps if mechanism == "laplace" else None
    return Guarantee(scope=PerResponse(eps_q=eps, mechanism=mechanism, noise_multiplier=noise, **kw),
                     boundary="retrieved-ids", retrieval_randomised=True, adjacency="substitution")


@settings(max_examples=40, deadline=None)
@given(eps=EPS, t=T, flags=st.lists(st.sampled_from([True, False, None]), min_size=0, max_size=4))
def test_the_claim_is_void_exactly_when_an_assumption_is_violated(eps, t, flags):
    g = _per_response(eps).model_copy(update={"assumptions": tuple(
        Assumption(name=f"a{i}", statement="s", met=m, detail=f"d{i}") for i, m in enumerate(flags))})
    e = epsilon_after(g, t, shown="retrieved-ids", method="basic")
    assert e.void == (False in flags)
    if e.void:
        assert math.isinf(e.eps) and e.delta == 1.0
        assert all(f"'a{i}' violated" in e.reason for i, m in enumerate(flags) if m is False)
    else:
        assert e.eps == pytest.approx(t * eps)
    card = build_card("x", g, queries=(t,), shown="retrieved-ids")
    assert card.void == (False in flags) and bool(card.void_reason) == card.void
    assert [a.met for a in card.assumptions] == flags
    assert sum("not checked" in w for w in card.warnings) == flags.count(None)


@settings(max_examples=40, deadline=None)
@given(eps=EPS, t=T, chunks=st.integers(1, 6), mechanism=st.sampled_from(["laplace", "exponential"]),
       method=st.sampled_from(["basic", "tight", "rdp"]))
def test_a_passage_level_proof_pays_group_privacy_over_the_chunks(eps, t, chunks, mechanism, method):
    doc = _per_response(eps, mechanism)
    passage = doc.model_copy(update={"mechanism_unit": "passage", "max_chunks": chunks})
    person = doc.model_copy(update={"unit": PersonUnit(max_docs=chunks)})
    got = epsilon_after(passage, t, method=method)
    assert got.eps == pytest.approx(epsilon_after(person, t, method=method).eps, rel=1e-9)
    assert got.eps <= chunks * t * eps + 1e-9
    if method == "basic":
        assert got.eps == pytest.approx(chunks * t * eps)
    # a passage-level proof with an unknown chunk count makes no document-level claim
    unknown = doc.model_copy(update={"mechanism_unit": "passage"})
    assert epsilon_after(unknown, t).void and "passages per document is unknown" in void_reason(unknown)


@settings(max_examples=40, deadline=None)
@given(eps=EPS, eps_r=EPS, t=T)
def test_citations_next_to_an_answers_claim_add_the_selection_epsilon(eps, eps_r, t):
    answers = Guarantee(scope=PerResponse(eps_q=eps), boundary="answers", retrieval_randomised=True,
                        retrieval_eps_q=eps_r, adjacency="substitution")
    for shown in ("answers+citations", "retrieved-ids"):
        assert epsilon_after(answers, t, shown=shown, method="basic").eps == pytest.approx(t * (eps + eps_r))
        assert epsilon_after(answers, t, shown=shown).eps <= t * (eps + eps_r) + 1e-9
    assert epsilon_after(answers, t, shown="answers", method="basic").eps == pytest.approx(t * eps)
    # a filter cannot absorb a selection that reads every document on every query
    filt = answers.model_copy(update={"scope": PerDocumentFilter(eps_q=eps, max_charges=2)})
    assert epsilon_after(filt, t, shown="answers+citations").void


@settings(max_examples=30, deadline=None)
@given(eps=EPS, cap=st.integers(1, 50), t=T)
def test_a_stream_budget_caps_eps_and_a_per_principal_budget_does_not(eps, cap, t):
    stream = _per_response(eps, max_queries=cap, budget_scope="stream")
    principal = _per_response(eps, max_queries=cap, budget_scope="principal")
    uncapped = _per_response(eps)
    assert epsilon_after(stream, t, method="basic").eps == pytest.approx(min(t, cap) * eps)
    assert epsilon_after(principal, t, method="basic").eps == pytest.approx(epsilon_after(uncapped, t, method="basic").eps)
    assert epsilon_after(principal, t).eps == pytest.approx(epsilon_after(uncapped, t).eps)


def test_card_states_adjacency_group_and_resets_and_round_trips():
    g = _per_response(1.0, "laplace", max_queries=4, budget_scope="principal").model_copy(
        update={"mechanism_unit": "passage", "max_chunks": 3})
    card = build_card("x", g, queries=(1, 10), shown="retrieved-ids")
    assert card.adjacency.startswith("substitution") and "3 passages" in card.group
    assert "new client id" in card.resets and card.schema_version == 2
    assert card.curve[1].basic.eps == pytest.approx(30.0)
    assert type(card).model_validate_json(card.model_dump_json()) == card
    unstated = build_card("y", Guarantee(scope=PerResponse(eps_q=1.0)))
    assert unstated.adjacency == "not stated" and any("adjacency" in w for w in unstated.warnings)
