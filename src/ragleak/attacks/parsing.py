"""Attacker-side text tools: split an answer into chunks, find PII, refusals (ROUGE-L: ``ragleak.lcs``).

These are what an attacker can compute from answers alone; none of them sees the corpus.
"""

from __future__ import annotations

import re

from ragleak.nlp.recognizers import EMAIL_ATTACKER, NAME_ATTACKER, PHONE_ATTACKER

# the attacker-side patterns of ``nlp.recognizers`` (attacker belief only, not a metric)
EMAIL = EMAIL_ATTACKER.pattern
PHONE = PHONE_ATTACKER.pattern
NAME = NAME_ATTACKER.pattern  # a crude person-name candidate: two or three capitalised words
NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
WORD = re.compile(r"\w+")
_PASSAGE_MARK = re.compile(r"(?:^|\n)\s*(?:\*\*)?(?:Passage|Context|Chunk|Document)\s*\d+\s*(?:\*\*)?\s*[:.-]\s*", re.I)
_FENCE = re.compile(r"```[a-zA-Z]*\n?")
_REFUSAL = re.compile(
    r"\b(i don'?t know|i do not know|i'?m sorry|i am sorry|i cannot|i can'?t|not (?:able|allowed) to|"
    r"no (?:relevant )?(?:information|context)|does not (?:contain|provide|mention)|is not (?:in|mentioned))\b",
    re.I,
)


def split_chunks(answer: str, min_chars: int = 40) -> list[str]:
    """Pieces of an answer that look like copied context: split on 'Passage N:' style markers,
    code fences and blank lines; keep pieces of at least ``min_chars`` characters."""
    text = _FENCE.sub("\n", answer)
    pieces: list[str] = []
    for block in _PASSAGE_MARK.split(text):
        for para in re.split(r"\n\s*\n", block):
            para = " ".join(para.split())
            if len(para) >= min_chars:
                pieces.append(para)
    return pieces


def pii_items(text: str) -> dict[str, list[str]]:
    """Distinct e-mails, phone numbers and name candidates in ``text``, in order of appearance."""
    def uniq(xs):
        return list(dict.fromkeys(xs))

    emails = uniq(m.group(0).rstrip(".") for m in EMAIL.finditer(text))
    return {"email": emails, "phone": uniq(m.group(0) for m in PHONE.finditer(text)),
            "name": uniq(m.group(0) for m in NAME.finditer(text))}


def is_refusal(answer: str) -> bool:
    return not answer.strip() or bool(_REFUSAL.search(answer[:300]))


def tokens(text: str) -> list[str]:
    return [t.lower() for t in WORD.findall(text)]
