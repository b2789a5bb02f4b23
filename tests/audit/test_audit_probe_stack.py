"""The stack probe's cost (issue 38): answers generated only where they can decide something.

Model-free: a scripted probe with answers deferred gives every verdict that generating every
answer gives, on traps that need the answer (decoding settings greedy ignores, sampling, answer
maskers) and traps that do not (retrieval and prompt hooks), and generates fewer; the
determinism check finds a generator that does not repeat itself. With the packaged LLM
(``model``): ``ragleak audit FILE --probe stack`` on a small file through the CLI, no trace folder.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import textwrap

import pytest
from audit_helpers import FIXTURES
from typer.testing import CliRunner

from ragleak.audit.probe import build_probe, measure, select_inputs
from ragleak.audit.probe_answers import AnswerMemo
from ragleak.audit.probe_generator import ProbeGenerator
from ragleak.audit.runtime import defense_classes
from ragleak.audit.source import AuditError
from ragleak.cli import app
from ragleak.defenses.base import Defense
from ragleak.rag.cache import CachedGenerator
from ragleak.rag.prompt import ChatMessage

# traps whose verdict rests on the answer (settings, sampling, answer hooks) and on retrieval or prompt
PRE = ("GreedyIgnoresTopP", "SampledGeneration", "SoftmaxCalibration", "LongQueryGate", "DefinedUnderIf",
       "KeywordSetFilter", "AppendsSources")
POST = ("SeedOnlyUnderGreedy", "ShortAnswers", "TieBreakSort", "UpperCaseAnswer", "SystemPromptSwap",
        "GenerateTwiceKeepFirst")


class _SettingsFromPromptHook(Defense):
    """Sets the shared generator's decoding settings from a prompt hook: the prompt is unchanged,
    so the deferred answers must be generated to tell (greedy ignores top_p, not max_tokens)."""

    hooks = frozenset({"rewrite_context"})
    update: dict = {}

    def prepare(self, ctx):
        self._inner = ctx.stack.generator("target").inner

    def rewrite_context(self, query, passages):
        self._inner.params = self._inner.params.model_copy(update=self.update)
        return passages


class TopPFromPromptHook(_SettingsFromPromptHook):
    update = {"top_p": 0.5}


class ShortFromPromptHook(_SettingsFromPromptHook):
    update = {"max_tokens": 5}


@pytest.fixture(scope="module")
def probes():
    logging.disable(logging.WARNING)
    inputs = select_inputs(["email", "phone", "sensitive", "long-query", "injection"])
    try:
        yield build_probe("scripted", inputs=inputs), build_probe("scripted", inputs=inputs, defer_answers=True)
    finally:
        logging.disable(logging.NOTSET)


def _classes(name: str) -> dict[str, type]:
    return {c.__name__: c for c in defense_classes(FIXTURES / f"{name}.py")[0]}


def test_deferred_answers_give_the_verdicts_of_every_answer_generated(probes):
    every, staged = probes
    deferred = dataclasses.replace(staged, staged=False)  # deferral alone: every count comparable
    classes = {**{k: v for k, v in _classes("redteam_effect_pre").items() if k in PRE},
               **{k: v for k, v in _classes("redteam_effect_post").items() if k in POST}}
    assert len(classes) == len(PRE) + len(POST)
    classes.update(TopPFromPromptHook=TopPFromPromptHook, ShortFromPromptHook=ShortFromPromptHook)
    not_generated = 0
    for name, cls in classes.items():
        a, b = measure(every, cls), measure(deferred, cls)
        for x, y in zip(a.hooks, b.hooks):
            assert (x.verdict, x.triggers, x.releases) == (y.verdict, y.triggers, y.releases), (name, x.hook, y.reason)
            for c in ("retrieval", "context"):
                assert x.channels.get(c) == y.channels.get(c), (name, x.hook, c)
            not_generated += y.channels["output"].not_generated if y.channels else 0
        if name.endswith("FromPromptHook"):  # same prompt, other settings: generated and compared
            assert b.effect("rewrite_context").verdict == ("inactive" if name.startswith("TopP") else "active")
        # two stages: the verdicts are the same; a hook active on the neutral inputs is not run on the pairs
        for x, z in zip(a.hooks, measure(staged, cls).hooks):
            assert x.verdict == z.verdict, (name, x.hook, z.reason)
            first = any("first stage" in n for n in z.sensitivity)
            assert first == (x.verdict == "active" and not x.releases and z.with_inputs == 0)
            if not first:
                assert (x.triggers, x.releases, x.channels.get("context")) == (z.triggers, z.releases, z.channels.get("context"))
    cost = deferred.cost()
    assert not_generated > 0 and cost.stand_ins > 0 and cost.never_generated > 0
    # the memo: one generation per distinct (model, settings, prompt), however many runs sent it
    assert cost.answers_generated < every.cost().generations
    assert deferred.answers is not None and deferred.answers.deterministic is True
    assert "the same text" in (cost.determinism or "")


class _Drifting(ProbeGenerator):
    """A generator whose reply changes from call to call (a decoding that is not deterministic)."""

    def _reply(self, messages, prompt):
        return f"{super()._reply(messages, prompt)} call {self.calls}"


def test_determinism_check_finds_a_generator_that_does_not_repeat_itself():
    memo = AnswerMemo(CachedGenerator(_Drifting(), None))
    for q in ("when does the ferry leave", "what does the library lend"):
        memo.defer([ChatMessage(role="user", content=f"Question: {q}")], None)
    finding = memo.check_determinism()
    assert memo.deterministic is False and "differed" in finding
    assert memo.rechecked == 2 and len(memo.texts) == 2  # two generated (one between), both decoded again


def test_probe_types_selects_pairs_and_refuses_unknown_types():
    chosen = select_inputs(["email"])
    assert {i.pattern for i in chosen if i.pattern} == {"email"}
    assert any(i.pair is None for i in chosen) and len(chosen) < len(select_inputs())
    with pytest.raises(AuditError, match="unknown probe type"):
        select_inputs(["emial"])
    result = CliRunner().invoke(app, ["audit", "pad-regex", "--probe-types", "email"])
    assert result.exit_code != 0 and "--probe" in str(result.exception)


DEFENSES = '''
from ragleak.defenses.base import Defense


class LongWordMask(Defense):
    """Masks every long word of the context."""

    hooks = frozenset({"rewrite_context"})

    def rewrite_context(self, query, passages):
        masked = lambda t: " ".join("[MASK]" if len(w) > 7 else w for w in t.split())  # noqa: E731
        return [p.model_copy(update={"text": masked(p.text)}) for p in passages]


class ReturnsInput(Defense):
    """Claims to filter the context."""

    hooks = frozenset({"rewrite_context"})

    def rewrite_context(self, query, passages):
        return list(passages)


class DemoteBest(Defense):
    """Demotes the best match below the rest."""

    hooks = frozenset({"score_retrieval"})

    def score_retrieval(self, query, candidates):
        if not candidates:
            return candidates
        low = min(c.score for c in candidates) - 1.0
        return [candidates[0].model_copy(update={"score": low}), *candidates[1:]]
'''


@pytest.mark.model
def test_cli_probe_stack_on_a_file_of_defenses_needs_no_trace_folder(tmp_path, monkeypatch):
    path = tmp_path / "mine.py"
    path.write_text(textwrap.dedent(DEFENSES))
    monkeypatch.chdir(tmp_path)  # nothing but the file: no run folder, no traces
    result = CliRunner().invoke(app, ["audit", str(path), "--probe", "stack", "--probe-types", "email", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    verdicts = {d["cls"]: {h["hook"]: h["verdict"] for h in d["hooks"] if h["overridden"]} for d in data["defenses"]}
    assert verdicts == {"LongWordMask": {"rewrite_context": "active"}, "ReturnsInput": {"rewrite_context": "inactive"},
                        "DemoteBest": {"score_retrieval": "active"}}
    problems = {d["cls"]: d["problems"] for d in data["defenses"]}
    assert problems["ReturnsInput"] and not problems["LongWordMask"] and not problems["DemoteBest"]
    cost = data["cost"]
    # the packaged LLM ran: the determinism check decoded real prompts twice and found the same text
    assert cost["probe"] == "stack" and cost["generations"] >= 3 and "the same text" in cost["determinism"]
    assert cost["never_generated"] > 0  # prompt hooks: their answers decide nothing, none generated
    assert [p.name for p in tmp_path.iterdir() if p.name != "__pycache__"] == ["mine.py"]  # wrote nothing
