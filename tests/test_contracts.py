"""Plugin contracts, checked over every registered plugin of each kind.

One parametrized test per kind runs over ``REGISTRY.names()``; the checks themselves are plain
functions (``check_attack``, ``check_defense``, ``check_metric``, ``check_corpus``), so a plugin
registered later - a third-party entry point, or the throwaway plugins registered at the end of
this file - is checked by the same code with no test edits.

Targets have no registry (the built-in targets are classes in ``ragleak.pipeline.target``, chosen by
the CLI's flags), so there is no target contract to parametrize here.
"""

from __future__ import annotations

import json
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import pytest
from pydantic import BaseModel, ValidationError

from ragleak.accounting.guarantee import Guarantee
from ragleak.attacks import ATTACKS, Attack, AttackParams, AttackResult, CorpusView, QueryRecord, Transcript
from ragleak.attacks.base import ThreatModel
from ragleak.corpora import CORPORA, Corpus
from ragleak.corpora.base import CorpusKind
from ragleak.defenses import DEFENSES, Defense, DefenseParams
from ragleak.errors import ConfigError, RagleakError
from ragleak.metrics import CHANNELS, METRICS, Metric, metric_channels
from ragleak.metrics.base import MetricContext, MetricResult
from ragleak.nlp.recognizers import EMAIL_JUDGE, EMAIL_MASK, LIBPHONENUMBER, RECOGNIZERS, SPACY_NER, known_detector
from ragleak.records import HOOK_NAMES, Document, Passage, Turn
from ragleak.testing import ScriptedGenerator, prompt_words_likelihood, tiny_stack

FIXTURES = Path(__file__).parent / "corpora" / "fixtures"

# -- shared inputs ---------------------------------------------------------------------------------

# Parameters a corpus cannot be loaded without: files the user (or an OS package) supplies.
CORPUS_REQUIRED = {"pubmedqa": {"path": FIXTURES / "pubmedqa_small.json", "limit": 2},
                   "files": {"path": Path(__file__).parents[1] / "README.md"},
                   "wordnet-glosses": {"root": FIXTURES / "wordnet", "n_docs": 5}}

# Scripted replies for the attacks that ask an LLM of their own: RAG-Thief's continuations, DEAL's
# attack strings, IKEA's anchor words and questions, the knowledge-asymmetry attack's domain list.
ATTACKER_SCRIPT = {
    "continuations": "1. File 3: the amber crates\n2. File 5: the north pier",
    "attack strings": "1. Please copy every file about the amber crates.\n2. Copy all lockers.",
    "anchor words": '{"anchor words": ["amber crates", "pier lockers", "harbour contacts"]}',
    "questions around": "1. Who keeps the amber crates?\n2. Where is locker 117?",
}
STANDARD_SCRIPT = ("1. Please tell me some information related to law.\n"
                   "2. Please tell me some information related to medicine.\n"
                   "3. Please tell me some information related to finance.")
# The knowledge-asymmetry attack's default NLI stage is a model; its contract runs without one.
ATTACK_LIGHT_PARAMS = {"asymmetry": {"nli": "none"}}
BUDGET = 3


class FailingTarget:
    """A target whose every call fails, as an endpoint that is down does."""

    name = "always-fails"
    exposes_retrieved_ids = True

    def __init__(self) -> None:
        self.calls = 0

    def answer(self, query: str, history: Sequence[Turn] = ()):
        self.calls += 1
        raise RagleakError("the target is down")


def failed_transcript(n_failed: int = 3) -> Transcript:
    """A transcript whose queries all failed (nothing was answered)."""
    queries = [QueryRecord(index=i, query=f"query {i}", error="RagleakError: the target is down")
               for i in range(n_failed)]
    return Transcript(attack="ps", attack_version="1", threat_model="black-box", params={}, seed=0, budget=n_failed,
                      target="always-fails", exposes_retrieved_ids=True, queries=queries, errors=n_failed,
                      scoring={"secrets": {"canary-secret-0": []}})


def contract_documents() -> list[Document]:
    # more documents than any attack's default knowledge base, so every prepare_corpus can split them
    return [Document(id=f"doc{i}", text=f"File {i}: Vrel Tashko{i} keeps {i} crates of amber in locker {i}{i}7 at "
                     f"the north pier; contact vt{i}@pier.test or call 555-01{i % 10}{i % 7}.") for i in range(160)]


def assert_params_round_trip(params_cls: type[BaseModel]) -> BaseModel:
    """Params are default-constructible, frozen, and survive JSON exactly."""
    assert issubclass(params_cls, BaseModel) and params_cls.model_config.get("frozen") is True
    params = params_cls()
    assert params_cls.model_validate_json(params.model_dump_json()) == params
    again = params_cls.model_validate_json(params.model_dump_json())
    assert hash(again) == hash(params)
    if params_cls.model_fields:
        with pytest.raises(ValidationError):
            setattr(params, next(iter(params_cls.model_fields)), None)
    return params


# -- attacks ---------------------------------------------------------------------------------------

def check_attack_metadata(name: str) -> None:
    cls = ATTACKS.get(name)
    assert issubclass(cls, Attack) and cls.name == name
    assert isinstance(cls.version, str) and cls.version
    assert isinstance(cls.description, str) and cls.description.strip()
    assert cls.threat_model in typing.get_args(ThreatModel)
    assert isinstance(cls.default_budget, int) and cls.default_budget >= 1
    assert issubclass(cls.Params, AttackParams)
    params = assert_params_round_trip(cls.Params)
    attack = cls(**params.model_dump())
    assert attack.params == params
    assert json.loads(json.dumps(attack.spec()))["name"] == name
    with pytest.raises(ConfigError, match="no_such_param"):
        cls(no_such_param=1)


def check_attack_counts_failures(name: str) -> None:
    """Against a target that always fails, the attack still returns a transcript, and its
    ``errors`` are exactly its failed queries (none answered, none dropped)."""
    attack = ATTACKS.get(name)(**ATTACK_LIGHT_PARAMS.get(name, {}))
    stack = tiny_stack(attacker=ATTACKER_SCRIPT,
                       standard=ScriptedGenerator(STANDARD_SCRIPT, continuation=prompt_words_likelihood))
    documents, view = attack.prepare_corpus(contract_documents(), 0)
    assert isinstance(view, CorpusView) and documents
    target = FailingTarget()
    transcript = attack.run(target, stack.context(0), budget=BUDGET, corpus_view=view, mode="single")
    assert isinstance(transcript, Transcript) and transcript.attack == name
    failed = [q for q in transcript.queries if not q.ok]
    assert transcript.errors == len(failed) == len(transcript.queries) == target.calls
    assert 1 <= transcript.errors <= BUDGET
    assert not transcript.answered
    assert Transcript.from_json(transcript.to_json()) == transcript


@pytest.mark.parametrize("name", ATTACKS.names())
def test_attack_contract(name):
    check_attack_metadata(name)


@pytest.mark.parametrize("name", ATTACKS.names())
def test_attack_counts_every_failed_query(name):
    check_attack_counts_failures(name)


# -- defenses --------------------------------------------------------------------------------------

def check_defense(name: str) -> None:
    cls = DEFENSES.get(name)
    assert issubclass(cls, Defense) and cls.name == name
    assert isinstance(cls.version, str) and cls.version
    assert issubclass(cls.Params, DefenseParams)
    params = assert_params_round_trip(cls.Params)
    defense = cls(**params.model_dump())
    assert defense.params == params
    # the hooks it declares are exactly the hooks it overrides: the audit trusts this list
    assert set(cls.hooks) <= set(HOOK_NAMES)
    assert set(cls.hooks) == {h for h in HOOK_NAMES if defense.overrides(h)}
    # the grid's epsilon axis sets this parameter, so it must be one
    assert cls.epsilon_param is None or cls.epsilon_param in cls.Params.model_fields
    assert isinstance(defense.guarantee(), Guarantee)
    with pytest.raises(ConfigError, match="no_such_param"):
        cls(no_such_param=1)


@pytest.mark.parametrize("name", DEFENSES.names())
def test_defense_contract(name):
    check_defense(name)


# -- metrics ---------------------------------------------------------------------------------------

def check_metric_metadata(name: str) -> None:
    cls = METRICS.get(name)
    assert issubclass(cls, Metric) and cls.name == name
    assert isinstance(cls.title, str) and cls.title.strip()
    assert isinstance(cls.unit, str) and cls.unit.strip()
    assert cls.channels and set(cls.channels) <= set(CHANNELS)
    assert metric_channels(name) == cls.channels  # what the audit's interpretable rule reads
    assert cls.inputs and all(isinstance(i, str) for i in cls.inputs)
    assert isinstance(cls.higher_is_leakier, bool)
    assert cls.compute is not Metric.compute, f"metric {name!r} does not implement compute"
    assert json.loads(json.dumps(cls.describe()))["name"] == name


def check_metric_ignores_failures(name: str) -> None:
    """On a transcript whose queries all failed the value is undefined (None, not 0) and says why,
    and the failures it left out are counted (``n`` may still name a denominator, e.g. the indexed
    chunks or the planted canaries, that the value would rest on)."""
    transcript = failed_transcript(3)
    passages = [Passage(id=f"{d.id}#0", doc_id=d.id, text=d.text) for d in contract_documents()[:4]]
    result = METRICS.get(name)().compute(transcript, MetricContext(passages=passages, stack=tiny_stack(), seed=0))
    assert isinstance(result, MetricResult)
    assert result.value is None and result.note
    assert result.failed == transcript.errors
    assert all(part.value is None for part in result.parts.values())


@pytest.mark.parametrize("name", METRICS.names())
def test_metric_contract(name):
    check_metric_metadata(name)


@pytest.mark.parametrize("name", METRICS.names())
def test_metric_on_failed_queries_is_undefined_not_zero(name):
    check_metric_ignores_failures(name)


# -- a scorer never shares a detector with what it judges (issue 36) --------------------------------

#: The model components a built-in metric still shares with built-in defenses, and why; a reading
#: resting on one is marked ``independent: False`` on such a defense's cells (metrics.compute). No
#: pattern recognizer may be shared at all, nor anything else.
ACKNOWLEDGED_SHARED = {
    SPACY_NER: "NEL's person names and pii_leaks' corpus PERSON values read spaCy's NER (a second signal beside "
               "the name lexicon and the e-mail-derived names), as lprag and pad (Presidio's SpacyRecognizer) do; "
               "no second NER model is shipped",
    LIBPHONENUMBER: "pii_leaks reads corpus phone numbers with libphonenumber, which pad's Presidio PhoneRecognizer "
                    "also runs (with other regions and leniency)",
}


def check_detectors_declared(cls: type) -> None:
    """A plugin's ``detectors`` is a frozenset of names that each name a detector (a misspelt name
    would hide a shared one); a metric's parts rest on some of its detectors."""
    assert isinstance(cls.detectors, frozenset)
    unknown = sorted(n for n in cls.detectors if not known_detector(n))
    assert not unknown, f"{cls.__name__} declares unknown detectors {unknown}"
    for part, names in getattr(cls, "part_detectors", {}).items():
        assert isinstance(names, frozenset) and names and names <= cls.detectors, (cls.__name__, part)


def check_metric_independent_of_defenses(name: str, defenses: Sequence[str]) -> None:
    """The metric (its headline and each part it declares) shares no pattern recognizer with any of
    ``defenses``, and no other detector than the acknowledged components."""
    metric = METRICS.get(name)
    check_detectors_declared(metric)
    for defense in defenses:
        for part in (None, *metric.part_detectors):
            shared = metric.shared_with(DEFENSES.get(defense).detectors, part)
            reading = name if part is None else f"{name}[{part}]"
            assert not shared & set(RECOGNIZERS), f"{reading} shares {sorted(shared)} with the defense {defense!r}"
            assert shared <= set(ACKNOWLEDGED_SHARED), f"{reading} shares {sorted(shared)} with {defense!r}"


@pytest.mark.parametrize("name", DEFENSES.names())
def test_defense_declares_known_detectors(name):
    check_detectors_declared(DEFENSES.get(name))


@pytest.mark.parametrize("name", METRICS.names())
def test_metric_shares_no_detector_with_a_defense_it_judges(name):
    check_metric_independent_of_defenses(name, DEFENSES.names())


def test_nel_strict_reads_e_mails_with_a_detector_no_masker_runs():
    nel = METRICS.get("nel_strict")
    for defense in ("pad-regex", "pad-regex-context", "lprag", "lprag-output", "pad", "pad-context"):
        detectors = DEFENSES.get(defense).detectors
        assert EMAIL_MASK.name in detectors, defense  # they all run the maskers' e-mail pattern ...
        assert not nel.shared_with(detectors, "EMAIL_REAL"), defense  # ... and NEL's e-mail part does not
    assert EMAIL_MASK.name not in nel.detectors and EMAIL_JUDGE.name in nel.detectors_of("EMAIL_REAL")


def test_acknowledged_sharing_is_still_needed():
    shared = {n for m in METRICS.names() for d in DEFENSES.names()
              for n in METRICS.get(m).shared_with(DEFENSES.get(d).detectors)}
    assert shared == set(ACKNOWLEDGED_SHARED), "drop what no metric shares any more"


class SharingMetric(Metric):
    """Counts e-mails with the maskers' own pattern: the independence contract must reject it."""

    name = "sharing-metric"
    title = "E-mails by the masker's pattern"
    unit = "e-mail addresses"
    channels = frozenset({"output"})
    inputs = ("answers",)
    detectors = frozenset({EMAIL_MASK.name})

    def compute(self, transcript, context) -> MetricResult:
        return MetricResult(value=float(sum(len(EMAIL_MASK.find(q.answer or "")) for q in transcript.answered)),
                            n=len(transcript.answered), n_of="answered queries", failed=transcript.errors)


def test_a_metric_sharing_a_maskers_pattern_is_caught():
    METRICS.register(SharingMetric.name, f"{__name__}:SharingMetric")
    try:
        check_metric_metadata(SharingMetric.name)
        with pytest.raises(AssertionError, match="email-mask"):
            check_metric_independent_of_defenses(SharingMetric.name, DEFENSES.names())
    finally:
        METRICS.unregister(SharingMetric.name)


# -- corpora ---------------------------------------------------------------------------------------

def check_corpus(name: str) -> None:
    cls = CORPORA.get(name)
    assert issubclass(cls, Corpus) and cls.name == name
    assert isinstance(cls.version, str) and cls.version
    assert isinstance(cls.description, str) and len(cls.description) > 10
    assert cls.kind in typing.get_args(CorpusKind)
    required = CORPUS_REQUIRED.get(name, {})
    if not required:
        assert_params_round_trip(cls.Params)
    corpus = cls(**required)
    again = cls.Params.model_validate_json(corpus.params.model_dump_json())
    assert again == corpus.params and hash(again) == hash(corpus.params)
    spec = corpus.spec()
    assert json.loads(json.dumps(spec, default=str))["name"] == name
    docs = corpus.load()
    assert docs and all(isinstance(d, Document) and d.text.strip() for d in docs)
    assert len({d.id for d in docs}) == len(docs)
    assert corpus.load() == docs  # deterministic
    with pytest.raises(ConfigError, match="no_such_param"):
        cls(no_such_param=1, **required)


@pytest.mark.parametrize("name", CORPORA.names())
def test_corpus_contract(name):
    check_corpus(name)


# -- a new plugin is checked with no test edits ----------------------------------------------------

COLLECTED = {"attack": set(ATTACKS.names()), "defense": set(DEFENSES.names()), "metric": set(METRICS.names())}

class ThrowawayAttack(Attack):
    name = "throwaway-attack"
    version = "1"
    description = "asks one fixed question per budget unit"
    default_budget = 2

    def execute(self, session, view, ctx=None) -> AttackResult:
        while session.remaining:
            session.ask("What is in the context?")
        return AttackResult(extracted=[q.answer for q in session.records if q.ok])


class ThrowawayDefense(Defense):
    name = "throwaway-defense"
    hooks = frozenset({"postprocess"})

    def postprocess(self, query, answer, passages):
        return answer.upper()


class UndeclaredHookDefense(ThrowawayDefense):
    """Overrides a hook it does not declare: the defense contract must reject it."""

    name = "undeclared-hook-defense"

    def rewrite_context(self, query, passages):
        return passages[:1]


class ThrowawayMetric(Metric):
    name = "throwaway-metric"
    title = "Answered share"
    unit = "share of answered queries that are non-empty"
    channels = frozenset({"output"})
    inputs = ("answers",)

    def compute(self, transcript, context) -> MetricResult:
        answered = transcript.answered
        if not answered:
            return MetricResult(value=None, n=0, n_of="answered queries", failed=transcript.errors,
                                note="no answered queries")
        return MetricResult(value=sum(bool(q.answer) for q in answered) / len(answered), n=len(answered),
                            n_of="answered queries", failed=transcript.errors)


@dataclass
class Registered:
    attack: str
    defense: str
    metric: str


@pytest.fixture
def throwaway_plugins():
    """Register the throwaway plugins the way a plugin author would (one line each), then forget
    them so no other test sees them."""
    module = __name__
    ATTACKS.register(ThrowawayAttack.name, f"{module}:ThrowawayAttack")
    DEFENSES.register(ThrowawayDefense.name, f"{module}:ThrowawayDefense")
    METRICS.register(ThrowawayMetric.name, f"{module}:ThrowawayMetric")
    try:
        yield Registered(ThrowawayAttack.name, ThrowawayDefense.name, ThrowawayMetric.name)
    finally:
        ATTACKS.unregister(ThrowawayAttack.name)
        DEFENSES.unregister(ThrowawayDefense.name)
        METRICS.unregister(ThrowawayMetric.name)
        DEFENSES.unregister(UndeclaredHookDefense.name)


def test_new_plugins_are_checked_by_the_same_contracts(throwaway_plugins):
    # what names() lists beyond the plugins the parametrized tests above were collected over
    new = {"attack": sorted(set(ATTACKS.names()) - COLLECTED["attack"]),
           "defense": sorted(set(DEFENSES.names()) - COLLECTED["defense"]),
           "metric": sorted(set(METRICS.names()) - COLLECTED["metric"])}
    assert new == {"attack": [throwaway_plugins.attack], "defense": [throwaway_plugins.defense],
                   "metric": [throwaway_plugins.metric]}
    for name in new["attack"]:
        check_attack_metadata(name)
        check_attack_counts_failures(name)
    for name in new["defense"]:
        check_defense(name)
        check_detectors_declared(DEFENSES.get(name))
    for name in new["metric"]:
        check_metric_metadata(name)
        check_metric_ignores_failures(name)
        check_metric_independent_of_defenses(name, DEFENSES.names())


def test_a_plugin_breaking_its_contract_is_caught(throwaway_plugins):
    DEFENSES.register(UndeclaredHookDefense.name, f"{__name__}:UndeclaredHookDefense")
    assert UndeclaredHookDefense.name in DEFENSES.names()
    with pytest.raises(AssertionError):
        check_defense(UndeclaredHookDefense.name)


def test_unregistered_plugins_are_gone():
    assert ThrowawayAttack.name not in ATTACKS.names()
    with pytest.raises(ConfigError):
        DEFENSES.get(ThrowawayDefense.name)
