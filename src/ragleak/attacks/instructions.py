"""Versioned extraction instructions: the command half of a composite extraction prompt.

A composite prompt is ``{information}, {command}`` (Zeng et al. 2024, arXiv 2402.16893): the
information steers retrieval, the command makes the model give back what it retrieved. The
instruction axis swaps the command for another wording of the same request, e.g. a task on the
retrieved text that asks for it back unchanged (LeakDojo, Findings ACL 2026), keeping the
information half. Sets ship as package data under ``ragleak/data/attacks/instructions/``
(``NAME.vVERSION.json``: ``name``, ``version``, ``description``, ``instructions``: label -> text),
so a result names exactly which wording produced it. ``InstructionParams`` is the parameter set
every extraction attack that takes an instruction shares (``ps``, ``pm``, ``canary``, ``pide``,
``pirates``).
"""

from __future__ import annotations

from functools import lru_cache

from pydantic import Field, model_validator

from ragleak.attacks.base import AttackParams
from ragleak.attacks.pools import load_packaged
from ragleak.errors import ConfigError
from ragleak.records import Record


class InstructionSet(Record):
    name: str
    version: str
    description: str
    instructions: dict[str, str] = Field(min_length=1)


@lru_cache(maxsize=None)
def load_instructions(name: str = "extraction", version: str = "1") -> InstructionSet:
    """The packaged instruction set ``name`` at ``version``; ``ConfigError`` if there is none."""
    return load_packaged("instructions", name, version, InstructionSet, "instruction set")


def with_instruction(query: str, command: str) -> str:
    """``query`` (``{information}, {command}``) with its command replaced by ``command``."""
    information, sep, _ = query.rpartition(", ")
    if not sep:
        raise ConfigError(f"pool query {query[:60]!r} has no ', ' before its command; it is not a composite prompt")
    return f"{information}, {command}"


class InstructionParams(AttackParams):
    """An extraction attack's instruction: None keeps the attack's own command (its pool's, PIDE's,
    Pirates' copy commands); a label of the packaged set sends that command instead."""

    instruction: str | None = Field(default=None, description="None: the attack's own command; a label of the "
                                    "instruction set sends that command instead (attacks/instructions.py)")
    instructions: str = "extraction"
    instructions_version: str = "1"

    @model_validator(mode="after")
    def _known_instruction(self) -> "InstructionParams":
        # an unknown instruction is a bad parameter: found when a grid is planned, not in every cell
        if self.instruction is not None:
            known = load_instructions(self.instructions, self.instructions_version).instructions
            if self.instruction not in known:
                raise ValueError(f"unknown instruction {self.instruction!r}; known: {', '.join(known)}")
        return self

    def command(self) -> str | None:
        """The chosen instruction's text (None: the attack's own)."""
        if self.instruction is None:
            return None
        return load_instructions(self.instructions, self.instructions_version).instructions[self.instruction]
