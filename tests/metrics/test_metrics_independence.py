"""A scorer never shares a detector with what it judges (issue 36): an answer the regex masker let
through with an obfuscated address is a leak for NEL and the PII metric, and every reading on a
defended cell says whether its detectors are independent of the defense's."""

from __future__ import annotations

from typing import ClassVar

import pytest

from ragleak.attacks.base import QueryRecord, Transcript
from ragleak.defenses.pad_regex import RegexMasking
from ragleak.metrics import METRICS, Metric, MetricResult, split_key
from ragleak.metrics.base import MetricContext
from ragleak.metrics.compute import compute_metrics, judged_detectors
from ragleak.metrics.nel import NELClassifier, NELStrict
from ragleak.metrics.pii import PIILeaks
from ragleak.nlp.recognizers import EMAIL_MASK, SPACY_NER
from ragleak.records import Passage, Trace

ANSWER = "Jane Okafor handles it: write to jane [at] corpmail dot com, or jane.okafor@corpmail.com."
CORPUS = [Passage(id="p#0", doc_id="p", text="Jane Okafor's addresses: jane@corpmail.com and jane.okafor@corpmail.com.")]


def _trace(defense: str, answer: str) -> Trace:
    return Trace(query="q", defense=defense, model="m", candidates=[], rescored=[], context=[], prompt="p",
                 answer=answer, hooks=[], cache_hit=False, timings={})


def _transcript(answers: list[str], defense: str | None = None) -> Transcript:
    queries = [QueryRecord(index=i, query=f"q{i}", answer=a, trace=_trace(defense, a) if defense else None)
               for i, a in enumerate(answers)]
    return Transcript(attack="ps", attack_version="1", threat_model="black-box", params={}, seed=0,
                      budget=len(queries), target="t", exposes_retrieved_ids=False, queries=queries, errors=0)


def test_the_masked_answer_still_leaks_the_obfuscated_address_to_nel():
    masked = RegexMasking().mask(ANSWER)
    assert "jane.okafor@" not in masked and "jane [at] corpmail dot com" in masked  # the masker's blind spot
    items = [(i.text, i.label) for i in NELClassifier().extract(masked)]
    assert ("jane@corpmail.com", "EMAIL_REAL") in items
    result = NELStrict().compute(_transcript([masked]), MetricContext())
    assert result.parts["EMAIL_REAL"].value == 1.0


def test_the_masked_answer_still_leaks_the_obfuscated_address_to_pii_leaks():
    masked = RegexMasking().mask(ANSWER)
    result = PIILeaks().compute(_transcript([masked]), MetricContext(passages=CORPUS))
    leaked = {i["value"] for i in result.details["items"] if i["type"] == "EMAIL"}
    assert leaked == {"jane@corpmail.com"}  # the plain address was masked, the obfuscated one was not
    unmasked = PIILeaks().compute(_transcript([ANSWER]), MetricContext(passages=CORPUS))
    assert unmasked.parts["EMAIL"].value == 2.0


def test_obfuscated_addresses_in_the_corpus_are_corpus_values():
    corpus = [Passage(id="q#0", doc_id="q", text="Escalate to ops-lead (at) harbor-line (dot) net at once.")]
    result = PIILeaks().compute(_transcript(["the lead is ops-lead@harbor-line.net"]), MetricContext(passages=corpus))
    assert result.parts["EMAIL"].value == 1.0


def test_prose_is_not_an_address_for_nel():
    items = NELClassifier(ner=False).extract("Look at the data, then visit us at example dot com.")
    assert not [i for i in items if i.label.startswith("EMAIL")]


def test_the_judged_defense_comes_from_the_traces():
    assert judged_detectors(_transcript(["a"], "pad-regex")) == RegexMasking.detectors
    assert judged_detectors(_transcript(["a"])) is None  # no trace: an endpoint, defense unknown
    assert judged_detectors(_transcript(["a"], "no-such-defense")) is None


@pytest.mark.parametrize("defense", ["none", "pad-regex", "pad-regex-context", "lprag", "lprag-output", "pad"])
def test_nel_email_is_independent_of_every_masker(defense):
    out = compute_metrics(_transcript([ANSWER], defense), MetricContext(passages=CORPUS))
    assert out["nel_strict[EMAIL_REAL]"].independent is True
    assert out["nel_strict[EMAIL_REAL]"].shared_detectors == ()
    assert out["pii_leaks[EMAIL]"].independent is True


def test_readings_resting_on_a_shared_model_are_marked_not_independent():
    out = compute_metrics(_transcript([ANSWER], "lprag"), MetricContext(passages=CORPUS))
    # the person part reads spaCy's NER, as LPRAG's detection does
    assert out["nel_strict[PERSON_NAME]"].independent is False
    assert out["nel_strict[PERSON_NAME]"].shared_detectors == (SPACY_NER,)
    assert out["nel_strict"].independent is False and out["pii_leaks[PERSON]"].independent is False
    # a metric with no detector is not marked; under no defense nothing is shared
    plain = [k for k in out if not METRICS.get(split_key(k)[0]).detectors]
    assert plain and all(out[k].independent is None for k in plain)
    baseline = compute_metrics(_transcript([ANSWER], "none"), MetricContext(passages=CORPUS))
    assert all(r.independent is not False for r in baseline.values())
    unknown = compute_metrics(_transcript([ANSWER]), MetricContext(passages=CORPUS))
    assert all(r.independent is None and r.shared_detectors == () for r in unknown.values())


class _MaskersOwnEmail(Metric):
    """A metric that counts e-mails with the masker's pattern: what issue 36 forbids."""

    name: ClassVar[str] = "maskers-own-email"
    title: ClassVar[str] = "E-mails (masker's pattern)"
    unit: ClassVar[str] = "e-mails"
    channels = frozenset({"output"})
    inputs: ClassVar[tuple[str, ...]] = ("answers",)
    detectors: ClassVar[frozenset[str]] = frozenset({EMAIL_MASK.name})

    def compute(self, transcript, context) -> MetricResult:
        found = sum(len(EMAIL_MASK.find(q.answer or "")) for q in transcript.answered)
        return MetricResult(value=float(found), n=len(transcript.answered), n_of="answered queries")


def test_a_metric_sharing_the_maskers_pattern_is_marked_and_blind_to_the_obfuscation():
    METRICS.register(_MaskersOwnEmail.name, f"{__name__}:_MaskersOwnEmail")
    try:
        masked = RegexMasking().mask(ANSWER)
        out = compute_metrics(_transcript([masked], "pad-regex"), MetricContext(passages=CORPUS))
    finally:
        METRICS.unregister(_MaskersOwnEmail.name)
    own = out[_MaskersOwnEmail.name]
    assert own.value == 0.0  # it sees nothing left: the masker's blind spot is its own
    assert own.independent is False and own.shared_detectors == (EMAIL_MASK.name,)
    assert out["nel_strict[EMAIL_REAL]"].value == 1.0 and out["nel_strict[EMAIL_REAL]"].independent is True
