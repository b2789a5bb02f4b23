"""Text tools of the question-based membership attacks (entailment, interrogation, DCMI).

* ``sentences``: a candidate (or an answer) split into sentences, the units NLI compares;
* ``yes_no_label`` / ``interrogation_score``: the Interrogation Attack's scorer (Naseh et al., CCS
  2025, arXiv 2502.00306): the first standalone "yes" or "no" of a response is its label, anything
  else is "unknown"; score = (1/n) sum [I(label = truth) - lambda * I(label = unknown)]. A truth
  that is itself unknown never counts as matched, so two non-answers do not make a correct one
  (on RAG_MIA's released files this is what reproduces their reported AUCs);
* ``Antonyms`` / ``perturb``: WordNet antonym pointers (``!``) of adjectives and adverbs read from
  Debian's ``wordnet-base`` data files, and a seeded minimal perturbation of a text that replaces a
  share of its antonym-bearing words of 4+ letters (DCMI, Gao et al. 2025, arXiv 2509.06026, which perturbs
  ~6% of adjectives/adverbs; here without a part-of-speech tagger, so any word that WordNet lists
  as an adjective or adverb with an antonym is eligible [IMPL-CHOICE]).
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal, Sequence

from ragleak.errors import ConfigError

YesNo = Literal["yes", "no", "unknown"]
WORDNET_ROOT = Path("/usr/share/wordnet")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])|\n+")
_YES_NO = re.compile(r"\b(yes|no)\b", re.I)
_WORD = re.compile(r"[A-Za-z]+(?:-[A-Za-z]+)*")
_NUMBER = re.compile(r"\b\d+\b")
_AUX = re.compile(r"\b(is|are|was|were|can|will|does|do|did|has|have|had)\b")


def sentences(text: str, min_words: int = 3) -> list[str]:
    """Sentences of ``text`` (split after . ! ? before a capital or digit, and at line breaks) with
    at least ``min_words`` words; the whole text when no piece is long enough."""
    pieces = [" ".join(p.split()) for p in _SENTENCE.split(text)]
    kept = [p for p in pieces if len(p.split()) >= min_words]
    whole = " ".join(text.split())
    return kept or ([whole] if whole else [])


def yes_no_label(answer: str) -> YesNo:
    """The first standalone 'yes' or 'no' in ``answer`` (RAG_MIA's ``extract_yes_no``), else unknown."""
    match = _YES_NO.search(answer or "")
    return match.group(1).lower() if match else "unknown"  # type: ignore[return-value]


def interrogation_score(truths: Sequence[str], responses: Sequence[str], lam: float = 0.0) -> float:
    """Mean over questions of I(response label = truth label) - lam * I(response label unknown)."""
    if len(truths) != len(responses) or not truths:
        raise ValueError("one response per ground-truth answer, at least one")
    total = 0.0
    for truth, response in zip(truths, responses):
        t, r = yes_no_label(truth), yes_no_label(response)
        total += float(t != "unknown" and t == r) - lam * float(r == "unknown")
    return total / len(truths)


@dataclass(frozen=True)
class Antonyms:
    """Single-word adjective/adverb antonym pairs from WordNet (lower case, both directions)."""

    pairs: dict[str, str]

    @classmethod
    def load(cls, root: Path = WORDNET_ROOT) -> "Antonyms":
        return _load_antonyms(str(root))

    def get(self, word: str) -> str | None:
        return self.pairs.get(word.lower())


@lru_cache(maxsize=4)
def _load_antonyms(root: str) -> Antonyms:
    pairs: dict[str, str] = {}
    for pos in ("adj", "adv"):
        path = Path(root) / f"data.{pos}"
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError as exc:
            raise ConfigError(f"WordNet data file {path} not found; install Debian's wordnet-base "
                              "(apt-get install wordnet-base)") from exc
        words: dict[str, list[str]] = {}
        pointers: list[tuple[str, int, str, int]] = []
        for line in lines:
            if not line or line.startswith("  "):
                continue
            fields = line.split("|", 1)[0].split()
            offset, n_words = fields[0], int(fields[3], 16)
            lemmas = [re.sub(r"\(\w+\)$", "", fields[4 + 2 * i]).lower() for i in range(n_words)]
            words[offset] = lemmas
            at = 4 + 2 * n_words
            for j in range(int(fields[at])):
                symbol, target, _, st = fields[at + 1 + 4 * j: at + 5 + 4 * j]
                if symbol == "!":
                    pointers.append((offset, int(st[:2], 16), target, int(st[2:], 16)))
        for offset, src, target, dst in pointers:
            if target not in words or not src or not dst:
                continue
            a, b = words[offset][src - 1], words[target][dst - 1]
            if "_" not in a and "_" not in b and a != b:
                pairs.setdefault(a, b)
                pairs.setdefault(b, a)
    if not pairs:
        raise ConfigError(f"no antonym pairs read from WordNet under {root}")
    return Antonyms(pairs)


@dataclass(frozen=True)
class Perturbation:
    """A perturbed copy of a text and what changed (``kind``: antonym, number, negation or none)."""

    text: str
    kind: Literal["antonym", "number", "negation", "none"]
    changed: tuple[str, ...]


def _cased(word: str, like: str) -> str:
    return word.capitalize() if like[:1].isupper() else word


def perturb(text: str, antonyms: Antonyms, share: float = 0.06, seed: int | str = 0) -> Perturbation:
    """A minimally changed copy of ``text`` whose meaning differs: ``share`` of its antonym-bearing
    words (at least one) swapped for their WordNet antonyms at seeded positions. Without any such
    word [IMPL-CHOICE]: one number is changed (+1), else a 'not' follows the first auxiliary verb;
    ``kind`` 'none' (text unchanged) when none of these applies."""
    rng = random.Random(f"ragleak.mi.perturb:{seed}")
    # short particles (on/off, in/out, up/down) swap into ungrammatical text, not a changed claim
    spots = [m for m in _WORD.finditer(text) if len(m.group(0)) >= 4 and antonyms.get(m.group(0))]
    if spots:
        k = max(1, math.ceil(share * len(spots)))
        chosen = sorted(rng.sample(spots, min(k, len(spots))), key=lambda m: m.start())
        out, last, changed = [], 0, []
        for m in chosen:
            word = m.group(0)
            out += [text[last:m.start()], _cased(antonyms.get(word) or word, word)]
            last = m.end()
            changed.append(word)
        return Perturbation("".join(out) + text[last:], "antonym", tuple(changed))
    number = _NUMBER.search(text)
    if number:
        new = str(int(number.group(0)) + 1)
        return Perturbation(text[:number.start()] + new + text[number.end():], "number", (number.group(0),))
    aux = _AUX.search(text)
    if aux:
        return Perturbation(text[:aux.end()] + " not" + text[aux.end():], "negation", (aux.group(0),))
    return Perturbation(text, "none", ())
