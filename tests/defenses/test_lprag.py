"""lprag's detector and rewriting on text (the LDP statistics are in test_lprag_dp_vote_mechanisms.py)."""

from __future__ import annotations

import re

import pytest

from ragleak.context import RunContext
from ragleak.defenses.lprag import CANDIDATES, LPRAG, LPRAGOutput
from ragleak.records import Passage

TEXT = ("Patient record 4471: Maria Gonzales, born 1984-03-12, was treated at Riverside Clinic for asthma "
        "in May 2023. Her phone number is 555-0187 and her e-mail maria.g@riverside-clinic.org.")
PASSAGE = Passage(id="clinic#0", doc_id="clinic", text=TEXT)


def _prepared(seed: int = 7, **params) -> LPRAG:
    d = LPRAG(**params)
    d.prepare(RunContext(seed=seed))
    return d


def test_detects_names_orgs_emails_and_phones_but_not_dates():
    found = {(s.label, s.text(TEXT)) for s in _prepared().entities(TEXT)}
    assert {("PERSON", "Maria Gonzales"), ("EMAIL", "maria.g@riverside-clinic.org"), ("PHONE", "555-0187")} <= found
    assert not any(re.search(r"\d{4}-\d{2}-\d{2}|2023", text) for _, text in found)


@pytest.mark.parametrize("mechanism", ["dp", "deterministic"])
def test_original_entities_are_replaced_by_public_candidates(mechanism):
    d = _prepared(mechanism=mechanism)
    out = d.perturb(PASSAGE).text
    for secret in ("Maria Gonzales", "555-0187", "maria.g@riverside-clinic.org"):
        assert secret not in out
    assert any(name in out for name in CANDIDATES["PERSON"])
    assert any(email in out for email in CANDIDATES["EMAIL"])
    assert "1984-03-12" in out and "asthma" in out  # only entities change


def test_dp_draws_are_memoised_per_passage_and_value():
    d = _prepared()
    first = d.perturb(PASSAGE)
    assert all(d.perturb(PASSAGE) == first for _ in range(5))


def test_dp_draws_depend_on_the_run_seed_and_deterministic_ones_do_not():
    outs = {_prepared(seed=s).perturb(PASSAGE).text for s in range(6)}
    assert len(outs) > 1
    assert _prepared(seed=0).perturb(PASSAGE) == _prepared(seed=0).perturb(PASSAGE)  # reproducible
    det = {_prepared(seed=s, mechanism="deterministic").perturb(PASSAGE).text for s in range(3)}
    assert len(det) == 1


def test_hooks_and_guarantees_are_honest():
    d = LPRAG()
    assert d.hooks == {"rewrite_context"} and d.overrides("rewrite_context") and not d.overrides("postprocess")
    g = d.guarantee()
    assert not g.is_formal and "LDP" in g.notes and "No corpus-level" in g.notes
    assert "not differential privacy" in LPRAG(mechanism="deterministic").guarantee().notes


def test_candidate_lists_are_public_and_disjoint_from_the_test_corpus():
    everything = " ".join(c for cands in CANDIDATES.values() for c in cands)
    for secret in ("Maria Gonzales", "Ingrid Pettersen", "Tomas Eriksen", "555-0187"):
        assert secret not in everything


def test_output_variant_perturbs_entities_in_the_answer_but_not_public_substitutes():
    d = LPRAGOutput(epsilon=1.0)
    d.prepare(RunContext(seed=3))
    assert d.hooks == {"rewrite_context", "postprocess"} and d.overrides("postprocess")
    substitute = CANDIDATES["PERSON"][0]
    answer = f"{substitute} can be reached at maria.g@riverside-clinic.org or 555-0187, says Maria Gonzales."
    out = d.postprocess("q", answer, [])
    for secret in ("Maria Gonzales", "555-0187", "maria.g@riverside-clinic.org"):
        assert secret not in out
    assert out.startswith(substitute)                    # a public candidate passes unchanged
    assert d.postprocess("q", answer, []) == out          # memoised: the same draw every time
    assert d.postprocess("q", "Nothing to see here.", []) == "Nothing to see here."
    assert "passages and the answer" in d.guarantee().notes
