"""The audit's own vocabulary: stub-marker comments and the calls it knows the meaning of.

This module is data for the static inventory. It is the one place in ``src/`` allowed to spell
the stub markers (the repository's stub grep exempts ``src/ragleak/audit/``).
"""

from __future__ import annotations

import re

#: Comments that mark a body as unfinished. A hook whose source span (or the comment block right
#: above its ``def``) carries one of these counts as a pass-through, whatever its code does.
STUB_COMMENT = re.compile(
    r"\b(?:TODO|FIXME|XXX|TBD)\b"
    r"|\bnot\s+(?:yet\s+)?implemented\b"
    r"|\bfor\s+now\b"
    r"|^\W*(?:placeholder|stub(?:bed)?)\b"  # a comment that opens with the word
    r"|\b(?:placeholder|stub(?:bed)?)\s+(?:implementation|hook|body|code|version|only)\b",
    re.IGNORECASE,
)

#: Modules whose functions are regular-expression matches.
REGEX_MODULES = frozenset({"re", "regex"})

#: Methods of a compiled pattern (and of the ``re`` module) that match or rewrite by pattern.
REGEX_METHODS = frozenset({"sub", "subn", "search", "match", "fullmatch", "findall", "finditer", "split"})

#: Identifier shapes that name a compiled pattern when the audit cannot see its ``re.compile``.
PATTERN_NAME = re.compile(r"(?i)(?:^|_)(?:re|rx|regex|regexp|pattern|pat)s?(?:$|_)")

#: In-place mutators: calling one on the flowing value changes it.
MUTATING_METHODS = frozenset({
    "sort", "reverse", "append", "extend", "insert", "pop", "remove", "clear", "update",
    "setdefault", "popitem", "__setitem__", "__delitem__",
})

#: Receivers whose method calls are logging (never a change to the data).
LOGGER_NAMES = frozenset({"log", "logger", "logging", "_log", "_logger", "LOG", "LOGGER", "warnings"})
