"""wordnet-glosses: synset definitions read from Debian's ``wordnet-base`` data files.

WordNet 3.0 (Princeton licence) ships in Debian as ``/usr/share/wordnet/data.{noun,verb,adj,adv}``:
117,659 synsets, each a line ``offset lexfile pos w_cnt word lex_id ... | gloss``. A license
header opens each file; its lines start with two spaces. Each sampled synset becomes a Document
``"lemma, lemma: gloss"``. The sample is a seeded subset of ``n_docs`` synsets, returned in file
order (noun, verb, adj, adv), so the same seed gives the same corpus.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, field_validator

from ragleak.corpora.base import ENTITY_SEPARATOR, Corpus, CorpusKind, CorpusParams, seeded_rng
from ragleak.errors import CorpusError
from ragleak.records import Document

log = logging.getLogger(__name__)

PartOfSpeech = Literal["noun", "verb", "adj", "adv"]
POS_ORDER: tuple[PartOfSpeech, ...] = ("noun", "verb", "adj", "adv")
DEFAULT_ROOT = Path("/usr/share/wordnet")
INSTALL_HINT = "install Debian's wordnet-base (apt-get install wordnet-base)"
_SS_TYPES = {"noun": ("n",), "verb": ("v",), "adj": ("a", "s"), "adv": ("r",)}
_ADJ_MARKER = re.compile(r"\((?:a|p|ip)\)$")


class WordNetParams(CorpusParams):
    n_docs: int = Field(default=500, ge=1, description="seeded subsample size")
    seed: int = Field(default=0, description="subsample seed")
    pos: tuple[PartOfSpeech, ...] = Field(default=POS_ORDER, description="parts of speech to draw from")
    root: Path = Field(default=DEFAULT_ROOT, description="folder holding the data.<pos> files")

    @field_validator("pos")
    @classmethod
    def _distinct(cls, value: tuple[PartOfSpeech, ...]) -> tuple[PartOfSpeech, ...]:
        if not value:
            raise ValueError("choose at least one part of speech")
        if len(set(value)) != len(value):
            raise ValueError(f"parts of speech repeat: {value}")
        return value


class WordNetGlosses(Corpus):
    """A seeded sample of WordNet synset glosses: public, non-sensitive reference text."""

    name: ClassVar[str] = "wordnet-glosses"
    version: ClassVar[str] = "1"
    description: ClassVar[str] = "WordNet 3.0 glosses from Debian's wordnet-base (seeded sample, default 500)"
    kind: ClassVar[CorpusKind] = "public"
    Params: ClassVar[type[CorpusParams]] = WordNetParams

    def load(self) -> list[Document]:
        params: WordNetParams = self.params  # type: ignore[assignment]
        lines: list[tuple[PartOfSpeech, Path, int, str]] = []
        for pos in (p for p in POS_ORDER if p in params.pos):
            path = params.root / f"data.{pos}"
            try:
                text = path.read_text(encoding="utf-8")
            except FileNotFoundError as exc:
                raise CorpusError(f"WordNet data file {path} not found; {INSTALL_HINT}") from exc
            except (OSError, UnicodeDecodeError) as exc:
                raise CorpusError(f"{path}: cannot read WordNet data: {exc}") from exc
            lines.extend((pos, path, n, line) for n, line in enumerate(text.splitlines(), start=1)
                         if line.strip() and not line.startswith("  "))
        if params.n_docs > len(lines):
            raise CorpusError(f"WordNet under {params.root} has {len(lines)} synsets, fewer than n_docs={params.n_docs}")
        keep = sorted(seeded_rng(self.name, params.seed).sample(range(len(lines)), params.n_docs))
        return [parse_synset(*lines[i]) for i in keep]


def parse_synset(pos: PartOfSpeech, path: Path, line_no: int, line: str) -> Document:
    """One ``data.<pos>`` line as a Document; ``CorpusError`` naming file and line if malformed."""
    head, sep, gloss = line.partition("|")
    fields = head.split()
    try:
        if not sep or len(fields) < 6:
            raise ValueError("no '|' gloss separator or too few fields")
        offset, lexfile, ss_type, w_cnt = fields[0], int(fields[1]), fields[2], int(fields[3], 16)
        if ss_type not in _SS_TYPES[pos]:
            raise ValueError(f"synset type {ss_type!r} in the {pos} file")
        words = fields[4 : 4 + 2 * w_cnt : 2]
        if len(words) != w_cnt or not offset.isdigit():
            raise ValueError("word count does not match the line")
    except ValueError as exc:
        raise CorpusError(f"{path}:{line_no}: malformed WordNet synset line ({exc})") from exc
    lemmas = list(dict.fromkeys(_ADJ_MARKER.sub("", w).replace("_", " ") for w in words))
    gloss = gloss.strip()
    return Document(
        id=f"wn-{pos}-{offset}",
        text=f"{', '.join(lemmas)}: {gloss}",
        metadata={"pos": pos, "offset": offset, "lexfile": lexfile, "lemmas": ENTITY_SEPARATOR.join(lemmas)},
    )
