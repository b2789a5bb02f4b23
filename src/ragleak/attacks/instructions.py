"""Versioned extraction instructions: the command half of a composite extraction prompt.

A composite prompt is ``{information}, {command}`` (Zeng et al. 2024, arXiv 2402.16893): the
information steers retrieval, the command makes the model give back what it retrieved. The
instruction axis swaps the command for another wording of the same request, e.g. a task on the
retrieved text that asks for it back unchanged (LeakDojo, Findings ACL 2026), keeping the
information half. Sets ship as package data under ``ragleak/data/attacks/instructions/``
(``NAME.vVERSION.json``: ``name``, ``version``, ``description``, ``instructions``: label -> text),
so a result names exactly which wording produced it.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

from pydantic import Field

from ragleak.errors import ConfigError
from ragleak.records import Record


class InstructionSet(Record):
    name: str
    version: str
    description: str
    instructions: dict[str, str] = Field(min_length=1)


def _folder():
    return resources.files("ragleak").joinpath("data", "attacks", "instructions")


@lru_cache(maxsize=None)
def load_instructions(name: str = "extraction", version: str = "1") -> InstructionSet:
    """The packaged instruction set ``name`` at ``version``; ``ConfigError`` if there is none."""
    entry = _folder().joinpath(f"{name}.v{version}.json")
    if not entry.is_file():
        known = sorted(e.name.removesuffix(".json") for e in _folder().iterdir() if e.name.endswith(".json"))
        raise ConfigError(f"no instruction set {name!r} version {version!r}; packaged: {', '.join(known)}")
    found = InstructionSet.model_validate(json.loads(entry.read_text(encoding="utf-8")))
    if (found.name, found.version) != (name, version):
        raise ConfigError(f"instruction file {entry.name} declares {found.name}@{found.version}")
    return found


def with_instruction(query: str, command: str) -> str:
    """``query`` (``{information}, {command}``) with its command replaced by ``command``."""
    information, sep, _ = query.rpartition(", ")
    if not sep:
        raise ConfigError(f"pool query {query[:60]!r} has no ', ' before its command; it is not a composite prompt")
    return f"{information}, {command}"
