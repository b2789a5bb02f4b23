"""The audit by effect (issue 38): per hook, what reaches each channel, measured on paired probes
through the real pipeline (MiniLM embedder, FAISS index; the scripted probe generator), with the
static finding beside it; the two static bugs the issue names; the CLI's --probe and --strict."""

from __future__ import annotations

import json
import logging
import sys
import textwrap
import time
from datetime import datetime, timezone

import pytest
from audit_helpers import FIXTURES
from typer.testing import CliRunner

from ragleak.audit import inventory_class, inventory_file
from ragleak.audit.effect import audit_class
from ragleak.audit.inventory import StubHookError
from ragleak.audit.probe import build_probe, measure
from ragleak.audit.probe_generator import ProbeGenerator
from ragleak.audit.probe_corpus import NEUTRAL_QUESTION, PASSAGE_PAIRS, QUERY_FORMS, QUERY_PAIRS, probe_inputs
from ragleak.audit.state import changed, clock_reads, state_digests
from ragleak.audit.runtime import defense_classes
from ragleak.cli import app
from ragleak.defenses.base import Defense
from ragleak.rag.generator import DecodingParams
from ragleak.rag.prompt import ChatMessage

# one row per trap of the pre-change corpus (the benchmark scores all of them): cheap, and each can fail
SAMPLE = {
    "DecoratorSwallows": "inactive", "DiamondMRO": "active", "MetaclassWrapped": "active",
    "ReboundToBase": "not-overridden", "FinallyReturnsInput": "inactive", "DefinedUnderIf": "active",
    "InheritsSiblingTruncate": "active", "SoftmaxCalibration": "inactive", "PoolCapAboveTopK": "inactive",
    "PassageIdRewrite": "inactive", "GreedyIgnoresTopP": "inactive", "SampledGeneration": "active",
    "LongQueryGate": "pattern-limited", "SetitemNoise": "active", "AppendsSources": "inactive",
}


# the pairs the tests need (the benchmark runs them all): fewer corpora to embed
TYPES = {"email", "phone", "name", "number", "injection", "long-query", "question-mark", "upper-case"}


@pytest.fixture(scope="module")
def probe():
    logging.disable(logging.WARNING)
    inputs = [i for i in probe_inputs() if i.pair is None or i.pair.split(":")[1] in TYPES]
    try:
        yield build_probe("scripted", inputs=inputs)
    finally:
        logging.disable(logging.NOTSET)


@pytest.fixture(scope="module")
def pre_classes():
    classes, _ = defense_classes(FIXTURES / "redteam_effect_pre.py")
    return {c.__name__: c for c in classes}


def test_probe_pairs_differ_only_by_the_data_and_the_neutral_side_is_clean():
    inputs = probe_inputs()
    assert {i.side for i in inputs} == {"neutral", "with"}
    for kind, (with_text, without_text, _) in PASSAGE_PAIRS.items():
        assert with_text != without_text
    neutral_text = " ".join(t for _, t, _ in PASSAGE_PAIRS.values()) + " ".join(
        i.query for i in inputs if i.side == "neutral")
    assert not any(ch.isdigit() for ch in neutral_text) and "@" not in neutral_text
    assert {"email", "name", "phone", "id", "number", "injection", "long-query", "short-query"} <= \
        {i.pattern for i in inputs if i.pattern}
    assert all(k.split(":")[0] in {i.pattern for i in inputs} for k in QUERY_PAIRS)


def test_probe_generator_applies_decoding_settings_as_a_model_does():
    gen = ProbeGenerator(DecodingParams(max_tokens=200))
    msgs = [ChatMessage(role="system", content="s"),
            ChatMessage(role="user", content="Context:\nPassage 1: The ferry leaves at dawn.\n\nQuestion: when")]
    plain = gen.generate(msgs).text
    greedy_top_p = gen.generate(msgs, params=DecodingParams(max_tokens=200, top_p=0.5, seed=9)).text
    sampled = gen.generate(msgs, params=DecodingParams(max_tokens=200, temperature=0.8, seed=9)).text
    assert greedy_top_p == plain  # greedy decoding ignores top_p and the seed
    assert sampled != plain
    assert "The ferry leaves at dawn." in plain  # it quotes its first passage (release is exercised)


@pytest.mark.parametrize("cls_name", sorted(SAMPLE))
def test_pre_corpus_sample_measured_right(probe, pre_classes, cls_name):
    effect = measure(probe, pre_classes[cls_name])
    hooks = [h for h in effect.hooks if h.overridden] or [effect.effect("postprocess")]
    verdicts = {h.verdict for h in hooks}
    assert verdicts == {SAMPLE[cls_name]}, [(h.hook, h.verdict, h.reason) for h in hooks]


def test_pattern_limited_names_its_triggers_and_channels(probe, pre_classes):
    effect = measure(probe, pre_classes["DetectorDict"]).effect("rewrite_context")
    assert effect.verdict == "pattern-limited"
    assert {"email", "phone"} <= set(effect.triggers) and "name" not in effect.triggers
    assert effect.neutral_changed == 0 and effect.channels["context"].changed >= 2
    assert effect.channels["retrieval"].changed == 0


def test_static_is_shown_beside_and_disagreement_is_printed(probe, pre_classes):
    audit = audit_class(probe, pre_classes["SoftmaxCalibration"])
    row = next(r for r in audit.hooks if r.hook == "score_retrieval")
    assert row.verdict == "inactive" and row.static is not None
    assert row.static.status == "active" and row.agreement.startswith("disagree")
    assert any("candidate pools" in s for s in row.sensitivity)
    assert audit.problems  # an override measured inactive fails --strict


def test_setitem_with_a_random_draw_no_longer_reads_inactive():
    sys.path.insert(0, str(FIXTURES))
    import redteam_effect_pre

    finding = inventory_class(redteam_effect_pre.SetitemNoise).finding("score_retrieval")
    assert finding.status == "active", finding.evidence


def test_a_computed_hooks_does_not_stop_the_file_audit(tmp_path):
    path = tmp_path / "computed.py"
    path.write_text(textwrap.dedent('''
        from ragleak.defenses.base import Defense

        NAMES = ["postprocess"]


        class Computed(Defense):
            hooks = frozenset(h for h in NAMES)

            def postprocess(self, query, answer, passages):
                return answer[:10]


        class Constant(Defense):
            hooks = frozenset(NAMES)

            def postprocess(self, query, answer, passages):
                return answer[:10]
    '''))
    invs = {inv.cls: inv for inv in inventory_file(path)}
    assert invs["Constant"].declared_hooks == ["postprocess"] and not invs["Constant"].notes
    assert invs["Computed"].declared_hooks == [] and "computed" in invs["Computed"].notes[0]


def test_cli_probe_imports_the_file_with_its_folder_on_the_path(tmp_path):
    (tmp_path / "mybase.py").write_text(textwrap.dedent('''
        from ragleak.defenses.base import Defense


        class Base(Defense):
            def rewrite_context(self, query, passages):
                return [p.model_copy(update={"text": p.text[:20]}) for p in passages]
    '''))
    (tmp_path / "mine.py").write_text(textwrap.dedent('''
        from mybase import Base
        from ragleak.defenses.base import Defense


        class Truncating(Base):
            hooks = frozenset({"rewrite_context"})


        class Copying(Defense):
            hooks = frozenset({"postprocess"})

            def postprocess(self, query, answer, passages):
                return str(answer)
    '''))
    runner = CliRunner()
    result = runner.invoke(app, ["audit", str(tmp_path / "mine.py"), "--probe", "scripted", "--json"])
    assert result.exit_code == 0, result.output
    data = {d["cls"]: {h["hook"]: h for h in d["hooks"]} for d in json.loads(result.stdout)["defenses"]}
    assert data["Truncating"]["rewrite_context"]["verdict"] == "active"
    assert data["Copying"]["postprocess"]["verdict"] == "inactive"
    strict = runner.invoke(app, ["audit", f"{tmp_path / 'mine.py'}:Copying", "--probe", "scripted", "--strict"])
    assert strict.exit_code != 0 and isinstance(strict.exception, StubHookError)
    assert "postprocess is inactive" in str(strict.exception)
    ok = runner.invoke(app, ["audit", f"{tmp_path / 'mine.py'}:Truncating", "--probe", "scripted", "--strict"])
    assert ok.exit_code == 0, ok.output
    assert "not exercised" in ok.output and "static:" in ok.output


def test_cli_probe_refuses_run_and_strict_passes_a_registered_defense():
    runner = CliRunner()
    assert runner.invoke(app, ["audit", "pad-regex", "--probe", "scripted", "--run", "."]).exit_code != 0
    result = runner.invoke(app, ["audit", "pad-regex", "--probe", "scripted", "--strict", "--json"])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)["defenses"]
    post = next(h for h in row["hooks"] if h["hook"] == "postprocess")
    assert post["verdict"] == "pattern-limited" and "email" in post["triggers"]


def test_instance_bound_hooks_and_not_implemented_stubs(probe):
    classes = {c.__name__: c for c in defense_classes(FIXTURES / "redteam_effect_post.py")[0]}
    bound = measure(probe, classes["InstanceBound"]).effect("postprocess")
    assert bound.verdict == "active", bound.reason
    stub = measure(probe, classes["RaisesNotImplemented"]).effect("generate")
    assert stub.verdict == "inactive" and "NotImplementedError" in stub.reason


def test_a_reordering_of_the_same_passages_is_inactive(probe):
    classes = {c.__name__: c for c in defense_classes(FIXTURES / "redteam.py")[0]}
    effect = measure(probe, classes["ReversedContext"]).effect("rewrite_context")
    assert effect.verdict == "inactive" and "re-orders" in effect.reason
    assert effect.channels["context"].changed > 0  # the prompt did change: only its passages' order


# ------------------------------------------------------------------ state across calls and query forms


def _classes(name: str) -> dict[str, type]:
    return {c.__name__: c for c in defense_classes(FIXTURES / name)[0]}


def test_query_forms_differ_from_the_neutral_question_in_form_only():
    forms = {i.pattern: i for i in probe_inputs() if i.pair and i.pair.startswith("form:")}
    assert set(forms) == set(QUERY_FORMS) and all(i.side == "with" and i.corpus == "neutral" for i in forms.values())
    assert QUERY_FORMS["question-mark"] == NEUTRAL_QUESTION + "?"
    assert QUERY_FORMS["upper-case"].lower() == NEUTRAL_QUESTION
    assert QUERY_FORMS["whitespace"].strip() == NEUTRAL_QUESTION
    assert not any(ch.isdigit() or ch == "@" for q in QUERY_FORMS.values() for ch in q)


class _ShoutGate(Defense):
    hooks = frozenset({"postprocess"})

    def postprocess(self, query, answer, passages):
        return "Please do not shout." if query.isupper() else answer


def test_query_form_gates_are_pattern_limited_and_named_by_the_form(probe):
    question = measure(probe, _classes("redteam_effect_post.py")["QuestionMarkGate"]).effect("postprocess")
    assert question.verdict == "pattern-limited" and question.triggers == ["question-mark"], question.reason
    shout = measure(probe, _ShoutGate).effect("postprocess")
    assert shout.verdict == "pattern-limited" and shout.triggers == ["upper-case"], shout.reason


def test_a_budget_that_acts_after_more_calls_than_the_probe_makes_is_active(probe):
    effect = measure(probe, _classes("redteam_effect_post.py")["BudgetRefusal"]).effect("postprocess")
    assert effect.verdict == "active" and "after 41 calls on one instance" in effect.reason, effect.reason
    assert any(s.startswith("stateful (instance.asked)") for s in effect.sensitivity)


class _ClassQuota(Defense):
    hooks = frozenset({"postprocess"})
    served = 0

    def postprocess(self, query, answer, passages):
        type(self).served += 1
        return "Quota reached." if type(self).served > 50_000 else answer


def test_a_counter_beyond_the_long_run_is_advanced_and_its_state_restored(probe):
    effect = measure(probe, _ClassQuota).effect("postprocess")
    assert effect.verdict == "active" and "advanced by" in effect.reason, effect.reason
    assert _ClassQuota.served < 50_000  # the advanced counter was put back


class _Journal(Defense):
    hooks = frozenset({"postprocess"})

    def __init__(self, params=None, **kwargs):
        super().__init__(params, **kwargs)
        self.log: list[str] = []

    def postprocess(self, query, answer, passages):
        self.log.append(answer.upper())  # "reviews" the answer, returns it unchanged
        return answer


def test_a_stateful_stub_stays_inactive_and_says_what_was_exercised(probe):
    effect = measure(probe, _Journal).effect("postprocess")
    assert effect.verdict == "inactive"
    assert any(s.startswith("stateful (instance.log)") and "no effect" in s for s in effect.sensitivity), \
        effect.sensitivity


_OFF_HOUR = (datetime.now(timezone.utc).hour + 12) % 24  # an hour the test does not run in


class _NightGate(Defense):
    hooks = frozenset({"postprocess"})

    def postprocess(self, query, answer, passages):
        return "Closed for the night." if datetime.now(timezone.utc).hour == _OFF_HOUR else answer


def test_a_gate_on_the_clock_the_probe_cannot_trigger_is_undetermined(probe):
    effect = measure(probe, _NightGate).effect("postprocess")
    assert effect.verdict == "undetermined" and "wall clock" in effect.reason, effect.reason
    assert "test_audit_effect.py" in effect.reason


def test_state_digests_see_the_defenses_state_not_the_pipelines():
    gen = ProbeGenerator(DecodingParams(max_tokens=20))
    journal = _Journal()
    journal.generator = gen  # machinery the defense holds: its call log is not the defense's state
    before = state_digests(journal, Defense)
    gen.generate([ChatMessage(role="user", content="hello")])
    assert changed(before, state_digests(journal, Defense)) == []
    journal.postprocess("q", "an answer", [])
    _ClassQuota.served += 1
    assert changed(before, state_digests(journal, Defense)) == ["instance.log"]
    quota = _ClassQuota()
    before = state_digests(quota, Defense)
    quota.postprocess("q", "a", [])
    assert changed(before, state_digests(quota, Defense)) == ["class _ClassQuota.served"]


def test_clock_reads_are_the_defenses_own_not_the_standard_librarys():
    seen: set[str] = set()
    with clock_reads(seen):
        logging.getLogger("ragleak.test").error("logging reads time.time() inside the standard library")
    assert seen == set()
    with clock_reads(seen):
        time.time()
    assert len(seen) == 1 and next(iter(seen)).startswith("time.time at ")


def test_a_hook_served_by_a_property_is_measured(probe):
    effect = measure(probe, _classes("redteam_effect_post2.py")["PropertyHook"]).effect("postprocess")
    assert effect.verdict == "active", effect.reason
