"""``pad-regex``: the seed's pattern-only PII masker (e-mails, phone numbers, identifiers).

Regular expressions (``_masking.REGEX_DETECTORS``) find e-mail addresses, phone numbers, SSNs,
card-like digit groups and long (6+ digit) account/record numbers in the generated answer and
replace each with ``<LABEL>``. It is pattern-limited by nature: names, addresses, dates and any
identifier that does not match a pattern pass through untouched, so in the dynamic audit it fires
only on answers that contain a match. ``pad-regex-context`` masks the retrieved passages too.

Not differential privacy: a deterministic function of the text with no noise; what it removes
is only what its patterns match.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, field_validator

from ragleak.accounting.guarantee import Guarantee
from ragleak.defenses._masking import MASKER_RECOGNIZERS, REGEX_DETECTORS, MaskingDefense, Span, regex_spans
from ragleak.defenses.base import DefenseParams
from ragleak.records import HookName, Passage


class RegexMaskingParams(DefenseParams):
    kinds: tuple[str, ...] = Field(default=tuple(REGEX_DETECTORS), description="which patterns to mask")

    @field_validator("kinds")
    @classmethod
    def _known(cls, kinds: tuple[str, ...]) -> tuple[str, ...]:
        unknown = set(kinds) - set(REGEX_DETECTORS)
        if unknown:
            raise ValueError(f"unknown pattern kinds {sorted(unknown)}; known: {', '.join(REGEX_DETECTORS)}")
        return kinds


class RegexMasking(MaskingDefense):
    name: ClassVar[str] = "pad-regex"
    version: ClassVar[str] = "1"
    hooks: ClassVar[frozenset[HookName]] = frozenset({"postprocess"})
    detectors: ClassVar[frozenset[str]] = frozenset(r.name for r in MASKER_RECOGNIZERS)
    Params: ClassVar[type[DefenseParams]] = RegexMaskingParams

    def __init__(self, params: DefenseParams | None = None, **kwargs) -> None:
        super().__init__(params, **kwargs)
        self.patterns = tuple((kind, REGEX_DETECTORS[kind]) for kind in REGEX_DETECTORS if kind in self.params.kinds)

    def spans(self, text: str) -> list[Span]:
        return regex_spans(text, self.params.kinds)

    def mask(self, text: str) -> str:
        # one pattern rewrite per kind, in REGEX_DETECTORS order (e-mails before the digit patterns,
        # so a number inside an address goes with the address); placeholders hold no digits or '@'
        for label, pattern in self.patterns:
            text = pattern.sub(f"<{label}>", text)
        return text

    def postprocess(self, query: str, answer: str, passages: list[Passage]) -> str:
        # the same loop as ``mask``, inline, so the static audit sees a pattern-limited change
        for label, pattern in self.patterns:
            answer = pattern.sub(f"<{label}>", answer)
        return answer

    def guarantee(self) -> Guarantee:
        return Guarantee(notes=(
            "regex PII masking is not differential privacy: no formal guarantee. It removes only "
            f"what its patterns match ({', '.join(self.params.kinds)}); names, places and unmatched "
            "identifiers are released unchanged"
        ))


class RegexContextMasking(RegexMasking):
    name: ClassVar[str] = "pad-regex-context"
    hooks: ClassVar[frozenset[HookName]] = frozenset({"rewrite_context", "postprocess"})

    def rewrite_context(self, query: str, passages: list[Passage]) -> list[Passage]:
        # ``mask`` over every passage, inline so the static audit sees a pattern-limited change
        texts = [p.text for p in passages]
        for label, pattern in self.patterns:
            texts = [pattern.sub(f"<{label}>", t) for t in texts]
        return [p.model_copy(update={"text": t}) for p, t in zip(passages, texts)]
