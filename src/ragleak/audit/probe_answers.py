"""The stack probe's answers: each distinct (model, decoding settings, prompt) generated at most once,
and only where an answer can decide something.

Greedy decoding under a fixed model and thread count is a function of the rendered prompt and the
decoding settings (``rag/cache.py`` keys the generation cache on exactly these). So in a probe run
where the answer reaches nothing but the answer channel - the defense's ``generate`` and
``postprocess`` are the identity there - the answer need not be generated at all while the run
goes: the pipeline gets a stand-in that names its key, and the answer channel of two such runs
is equal wherever the keys are equal. Where the keys differ:

* the prompt differs too: the prompt channel has already changed on that input, so the answer
  decides nothing and is not generated (``ChannelEffect.not_generated`` counts these);
* the prompt is the same and the settings differ (a hook that set the generator's settings):
  both answers are generated now (``resolve``), so a setting greedy decoding ignores reads as no
  change, as it does with every answer generated.

A run whose ``generate`` or ``postprocess`` is not the identity gets every answer generated (the
hook reads it; its release of context is judged on it). Every answer generated is kept in a memo
shared by every hook, input, control repeat and defense of the probe. What the memo rests on -
that the stack decodes deterministically - is checked, not assumed: ``check_determinism``
generates a few prompts again, bypassing every cache, after other prompts ran in between.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ragleak.rag.cache import cache_key
from ragleak.rag.generator import DecodingParams, Generation
from ragleak.rag.prompt import ChatMessage

#: How many generated prompts ``check_determinism`` decodes a second time.
DETERMINISM_SAMPLE = 2

_STAND_IN = "[answer not generated; key {key}]"


@dataclass
class Pending:
    """What generating one key's answer needs: the messages and the settings they went out with."""

    messages: list[ChatMessage]
    params: DecodingParams


@dataclass
class AnswerMemo:
    """The probe's answers by key (``texts``: generated, through the generation cache) and every key
    a run asked for (``requests``), shared by every run of one probe."""

    generator: Any  # the stack's target generator (a CachedGenerator or the scripted one)
    texts: dict[str, str] = field(default_factory=dict)
    requests: dict[str, Pending] = field(default_factory=dict)  # every key asked for: what generating it needs
    order: list[str] = field(default_factory=list)  # keys generated, in order (the determinism sample)
    stand_ins: int = 0  # pipeline generations answered by a stand-in
    rechecked: int = 0  # decodings of the determinism check (past every cache)
    determinism: str | None = None  # the check's finding, once made
    deterministic: bool | None = None

    def key(self, messages: Sequence[ChatMessage], params: DecodingParams | None) -> str:
        p = params or self.generator.params
        return cache_key(self.generator.model_id, p, self.generator.render(list(messages)))

    def _ask(self, messages: Sequence[ChatMessage], params: DecodingParams | None) -> str:
        key = self.key(messages, params)
        self.requests.setdefault(key, Pending(list(messages), params or self.generator.params))
        return key

    def generate(self, messages: Sequence[ChatMessage], params: DecodingParams | None) -> tuple[str, Generation]:
        """The real answer of ``messages`` (the memo's when it has it)."""
        key = self._ask(messages, params)
        if key in self.texts:
            return key, Generation(text=self.texts[key], prompt_tokens=0, completion_tokens=0,
                                   finish_reason="memo", seconds=0.0, cached=True)
        generation = self.generator.generate(list(messages), params)
        self._keep(key, generation.text)
        return key, generation

    def defer(self, messages: Sequence[ChatMessage], params: DecodingParams | None) -> tuple[str, Generation]:
        """The real answer if the memo has it, else a stand-in naming the key (generated later
        only if a comparison needs it)."""
        key = self._ask(messages, params)
        if key in self.texts:
            return key, Generation(text=self.texts[key], prompt_tokens=0, completion_tokens=0,
                                   finish_reason="memo", seconds=0.0, cached=True)
        self.stand_ins += 1
        return key, Generation(text=stand_in(key), prompt_tokens=0, completion_tokens=0,
                               finish_reason="deferred", seconds=0.0)

    def resolve(self, key: str) -> str:
        """The real answer of a key a run deferred (generated now, once)."""
        if key not in self.texts:
            item = self.requests[key]
            self._keep(key, self.generator.generate(item.messages, item.params).text)
        return self.texts[key]

    def _keep(self, key: str, text: str) -> None:
        if key not in self.texts:
            self.texts[key] = text
            self.order.append(key)

    def check_determinism(self, sample: int = DETERMINISM_SAMPLE) -> str:
        """Decode up to ``sample`` prompts again, bypassing the memo and the generation cache, and
        compare: the finding, as a sentence (kept: made once per probe). Where the probe generated
        fewer than two, deferred prompts are generated first (another prompt between the two
        decodings of one: state a call leaves behind must not change the next answer)."""
        if self.determinism is not None:
            return self.determinism
        inner = getattr(self.generator, "inner", self.generator)
        keys = self.order[:sample]
        if len(self.order) < 2:
            for key in [k for k in self.requests if k not in self.texts][: 2 - len(self.order)]:
                self.resolve(key)
            keys = self.order[:sample]
        if not keys:
            self.determinism, self.deterministic = "no answer was asked for: decoding determinism not checked", None
            return self.determinism
        differ = 0
        for key in keys:
            item = self.requests[key]
            differ += inner.generate(item.messages, item.params).text != self.texts[key]
            self.rechecked += 1
        self.deterministic = differ == 0
        self.determinism = (f"decoding determinism checked on {len(keys)} prompt(s) generated again: "
                            + ("the same text" if differ == 0 else f"{differ} differed - answer comparisons "
                               "by key are unsound, the answer channel is not credited"))
        return self.determinism


def stand_in(key: str) -> str:
    return _STAND_IN.format(key=key[:24])


class DeferringGenerator:
    """The pipeline's generator in a probe run: the stack's target generator with every answer
    deferred while ``defer()`` says no hook reads it (the run's ``generate`` and ``postprocess`` are
    the identity), else generated through the memo. Everything else (render, model id, settings,
    counters) is the generator's."""

    _OWN = frozenset({"_memo", "_defer", "keys", "deferred"})

    def __init__(self, memo: AnswerMemo, defer: Callable[[], bool]) -> None:
        object.__setattr__(self, "_memo", memo)
        object.__setattr__(self, "_defer", defer)
        object.__setattr__(self, "keys", [])  # per pipeline generation, in order
        object.__setattr__(self, "deferred", [])

    def __getattr__(self, name: str) -> Any:
        return getattr(self._memo.generator, name)

    def __setattr__(self, name: str, value: Any) -> None:
        # a hook that sets the generator's settings sets them where it would without the wrapper
        if name in self._OWN:
            object.__setattr__(self, name, value)
        else:
            setattr(self._memo.generator, name, value)

    def generate(self, messages: Sequence[ChatMessage], params: DecodingParams | None = None) -> Generation:
        key, generation = (self._memo.defer if self._defer() else self._memo.generate)(messages, params)
        self.keys.append(key)
        self.deferred.append(generation.finish_reason == "deferred")
        return generation
