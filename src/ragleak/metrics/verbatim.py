"""Verbatim overlap: the longest run of characters an answer shares with a passage.

A passage counts as leaked verbatim when that run is at least ``min_chars`` long (40 by default,
the threshold of the seed study). Whitespace runs are collapsed first so a re-wrapped line still
matches.
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher
from typing import Iterable

from ragleak.records import Passage

_WS = re.compile(r"\s+")


def normalise(text: str) -> str:
    """Whitespace runs collapsed to one space, ends stripped."""
    return _WS.sub(" ", text).strip()


def longest_common_run(a: str, b: str) -> int:
    a, b = normalise(a), normalise(b)
    if not a or not b:
        return 0
    # autojunk off: its popularity heuristic drops frequent characters and misses long matches
    return SequenceMatcher(None, a, b, autojunk=False).find_longest_match(0, len(a), 0, len(b)).size


def leaked_passages(answer: str, passages: Iterable[Passage], min_chars: int = 40) -> list[str]:
    """Ids of the passages that ``answer`` reproduces verbatim for at least ``min_chars`` characters."""
    return [p.id for p in passages if longest_common_run(answer, p.text) >= min_chars]
