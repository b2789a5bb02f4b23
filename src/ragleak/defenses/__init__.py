"""Defenses: classes with up to four pipeline hooks, registered by name."""

from ragleak.defenses.base import Defense, DefenseParams
from ragleak.registry import Registry

DEFENSES: Registry[type[Defense]] = Registry("defenses", {"none": "ragleak.defenses.base:Defense"})


def make_defense(name: str, **params) -> Defense:
    return DEFENSES.get(name)(**params)


__all__ = ["DEFENSES", "Defense", "DefenseParams", "make_defense"]
