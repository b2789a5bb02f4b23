"""Shared pieces of the masking defenses (``pad``, ``pad-regex``) and of LPRAG's detector.

Detection and transformation are separate (as in Presidio): a detector returns ``Span``s, and
``replace_spans`` rewrites the text. Overlapping spans are merged into one, labelled by the
longest (then the earliest-listed) span, so a masked e-mail never leaves a fragment of itself
behind.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import re
from dataclasses import dataclass
from typing import Callable, ClassVar, Iterable, Sequence

from ragleak.defenses.base import Defense
from ragleak.nlp.recognizers import CARD_MASK, EMAIL_MASK, LONG_NUMBER_MASK, PHONE_MASK, SSN_MASK
from ragleak.records import HookName, Passage


@dataclass(frozen=True)
class Span:
    start: int
    end: int
    label: str

    def text(self, source: str) -> str:
        return source[self.start:self.end]


# The seed's pattern-limited masker: e-mails, phone numbers and identifiers (``nlp.recognizers``'
# maskers' patterns). Order matters for equal-length overlaps (earlier wins), and pad-regex rewrites
# in this order (e-mails before the digit patterns).
MASKER_RECOGNIZERS = (EMAIL_MASK, SSN_MASK, CARD_MASK, PHONE_MASK, LONG_NUMBER_MASK)
REGEX_DETECTORS: dict[str, re.Pattern[str]] = {r.entity: r.pattern for r in MASKER_RECOGNIZERS}
EMAIL = EMAIL_MASK.pattern


def regex_spans(text: str, kinds: Iterable[str] = tuple(REGEX_DETECTORS)) -> list[Span]:
    return [Span(m.start(), m.end(), kind) for kind in kinds for m in REGEX_DETECTORS[kind].finditer(text)]


def merge_spans(spans: Sequence[Span]) -> list[Span]:
    """Disjoint spans covering the union of ``spans``; each merged group keeps the label of its
    longest member (ties: the first listed)."""
    order = {id(s): i for i, s in enumerate(spans)}
    merged: list[tuple[int, int, Span]] = []
    for span in sorted(spans, key=lambda s: (s.start, -s.end)):
        if merged and span.start < merged[-1][1]:
            start, end, best = merged[-1]
            longer = (span.end - span.start, -order[id(span)]) > (best.end - best.start, -order[id(best)])
            merged[-1] = (start, max(end, span.end), span if longer else best)
        else:
            merged.append((span.start, span.end, span))
    return [Span(start, end, best.label) for start, end, best in merged]


def replace_spans(text: str, spans: Sequence[Span], replacement: Callable[[Span, str], str]) -> str:
    """Rewrite ``text`` with every merged span replaced by ``replacement(span, original_text)``."""
    out, cursor = [], 0
    for span in merge_spans(spans):
        out.append(text[cursor:span.start])
        out.append(replacement(span, span.text(text)))
        cursor = span.end
    out.append(text[cursor:])
    return "".join(out)


def placeholder(span: Span, _original: str) -> str:
    return f"<{span.label}>"


class MaskingDefense(Defense, ABC):
    """Masks the released answer (``postprocess``) with ``mask``; subclasses supply the detector."""

    hooks: ClassVar[frozenset[HookName]] = frozenset({"postprocess"})

    @abstractmethod
    def spans(self, text: str) -> list[Span]:
        """The sensitive spans of ``text`` (the detector: regexes, or Presidio)."""

    def mask(self, text: str) -> str:
        return replace_spans(text, self.spans(text), placeholder)

    def postprocess(self, query: str, answer: str, passages: list[Passage]) -> str:
        return self.mask(answer)


class ContextMaskingMixin:
    """Also masks the retrieved passages before the LLM sees them (``rewrite_context``)."""

    hooks: ClassVar[frozenset[HookName]] = frozenset({"rewrite_context", "postprocess"})

    def rewrite_context(self, query: str, passages: list[Passage]) -> list[Passage]:
        return [p.model_copy(update={"text": self.mask(p.text)}) for p in passages]
