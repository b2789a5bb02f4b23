"""Generation streams: which cells of a grid make the same generations.

A cell's *generation stream* is the sequence of generations it makes. Cells of one stream share
every generation through the run's cache, so only the first pays (``grid.schedule`` runs it
first). Two cells have the same stream when they send the same prompts to the same generation
path:

* same attack (and parameters), corpus, seed, budget, stack and target; the mode too, unless the
  attack runs its own conversations (``Attack.own_conversations``: PM), where the mode axis is inert;
* the same defense, parameters and *applied* epsilon (an epsilon the defense ignores is inert);
  or, for a defense that acts only after generation, the baseline's path - but only when the
  attack's queries are fixed in advance (``Attack.adaptive`` False) and no prompt carries an
  earlier answer: an adaptive attack or a conversation sees the defended answers, so its later
  prompts differ from the baseline's.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from ragleak.attacks import ATTACKS
from ragleak.defenses import defense_class
from ragleak.grid.spec import CellSpec


def carries_answers(cell: CellSpec) -> bool:
    """Whether a prompt of the cell holds earlier answers (a conversation's history)."""
    attack = ATTACKS.get(cell.attack)(**cell.attack_params)
    return attack.own_conversations or cell.mode == "multi"


def stream_key(cell: CellSpec) -> tuple:
    """What a cell's generations depend on (see the module docstring)."""
    attack = ATTACKS.get(cell.attack)(**cell.attack_params)
    conversations = attack.own_conversations or cell.mode == "multi"
    shares_baseline = (defense_class(cell.defense).acts_after_generation_only()
                       and not attack.adaptive and not conversations)
    path: Any = "baseline" if shares_baseline else (
        cell.defense, repr(sorted(cell.defense_params.items())), cell.applied_epsilon)
    return (cell.attack, repr(cell.attack_params), cell.corpus, repr(cell.corpus_params),
            "-" if attack.own_conversations else cell.mode, cell.seed, cell.budget, repr(cell.stack),
            repr(cell.target), path)


def group_streams(cells: Iterable[CellSpec]) -> dict[tuple, list[CellSpec]]:
    """The cells by stream, in grid order; the first cell of each list pays for its generations."""
    out: dict[tuple, list[CellSpec]] = {}
    for cell in cells:
        out.setdefault(stream_key(cell), []).append(cell)
    return out


def stream_chains(cells: Iterable[CellSpec], cost: Callable[[CellSpec], float]) -> list[list[CellSpec]]:
    """The streams as chains in running order (grid order within one), the chains by decreasing
    ``cost`` of their first cell (ties: grid order): the order ``grid.schedule`` hands them out."""
    chains = list(group_streams(cells).values())
    return sorted(chains, key=lambda chain: -cost(chain[0]))  # stable: ties keep grid order
