"""Grid specs: what to run, expanded into cells whose id is a hash of their full spec.

A ``GridConfig`` (YAML or a preset) lists attacks, defenses, corpora, modes and epsilons plus the
stack settings and seeds; ``expand`` takes the product. Every cell carries its *complete* spec
(stack config included), so its id changes whenever anything that could change its result
changes, and a rerun skips exactly the cells already finished.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ragleak.config import StackConfig, load_yaml_model, validation_message
from ragleak.errors import ConfigError
from ragleak.records import digest

Mode = Literal["single", "multi"]
#: A cell where fewer than this share of queries got a response is ``failed`` (grid.store).
DEFAULT_MIN_ANSWERED_SHARE = 0.8


class CellSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    attack: str
    defense: str
    corpus: str
    mode: Mode = "single"
    epsilon: float | None = None
    seed: int = 0
    budget: int | None = Field(default=None, ge=1)
    attack_params: dict[str, Any] = Field(default_factory=dict)
    defense_params: dict[str, Any] = Field(default_factory=dict)
    corpus_params: dict[str, Any] = Field(default_factory=dict)
    stack: StackConfig = StackConfig()

    @property
    def cell_id(self) -> str:
        return digest(self.model_dump(mode="json"))[:20]

    @property
    def epsilon_param(self) -> str | None:
        """The defense parameter the grid's epsilon sets (``Defense.epsilon_param``), or None
        where the axis is inert: no epsilon, a defense without one (none, pad), or an explicit
        value in ``defense_params``, which wins."""
        from ragleak.defenses import DEFENSES

        param = DEFENSES.get(self.defense).epsilon_param
        if self.epsilon is None or param is None or param in self.defense_params:
            return None
        return param

    @property
    def applied_epsilon(self) -> float | None:
        """The grid epsilon this cell's defense actually runs with (None where the axis is inert)."""
        return None if self.epsilon_param is None else self.epsilon

    @property
    def label(self) -> str:
        eps = "-" if self.epsilon is None else f"{self.epsilon:g}"
        return f"{self.attack}/{self.defense}/{self.corpus}/{self.mode}/eps={eps}/seed={self.seed}"


class GridConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = "grid"
    attacks: list[str] = Field(min_length=1)
    defenses: list[str] = Field(min_length=1)
    corpora: list[str] = Field(min_length=1)
    modes: list[Mode] = Field(default_factory=lambda: ["single"], min_length=1)
    epsilons: list[float | None] = Field(default_factory=lambda: [None], min_length=1)
    seeds: list[int] = Field(default_factory=lambda: [0], min_length=1)
    budget: int | None = Field(default=None, ge=1, description="queries per cell; None = each attack's default")
    budgets: dict[str, int] = Field(default_factory=dict, description="per-attack budget, overriding `budget`")
    attack_params: dict[str, dict[str, Any]] = Field(default_factory=dict)
    defense_params: dict[str, dict[str, Any]] = Field(default_factory=dict)
    corpus_params: dict[str, dict[str, Any]] = Field(default_factory=dict)
    stack: StackConfig = StackConfig()
    min_answered_share: float = Field(
        default=DEFAULT_MIN_ANSWERED_SHARE, ge=0.0, le=1.0,
        description="a cell where fewer than this share of queries got a response is 'failed', never 'ok'")

    @field_validator("epsilons")
    @classmethod
    def _positive(cls, values: list[float | None]) -> list[float | None]:
        for v in values:
            if v is not None and v <= 0:
                raise ValueError(f"epsilon must be positive, got {v}")
        return values

    def expand(self) -> list[CellSpec]:
        cells = []
        for attack, defense, corpus, mode, eps, seed in itertools.product(
            self.attacks, self.defenses, self.corpora, self.modes, self.epsilons, self.seeds
        ):
            cells.append(CellSpec(
                attack=attack, defense=defense, corpus=corpus, mode=mode, epsilon=eps, seed=seed,
                budget=self.budgets.get(attack, self.budget), attack_params=self.attack_params.get(attack, {}),
                defense_params=self.defense_params.get(defense, {}),
                corpus_params=self.corpus_params.get(corpus, {}), stack=self.stack,
            ))
        ids = [c.cell_id for c in cells]
        if len(set(ids)) != len(ids):
            raise ConfigError("the grid lists the same cell twice (duplicate values in one of its axes)")
        return cells


ALL_DEFENSES = ["none", "dp-retrieval", "ca-dp", "private-rag", "pad", "lprag"]
PAPER_ATTACKS = ["ps", "pm", "rag-thief", "ikea", "deal", "mi"]

PRESETS: dict[str, dict[str, Any]] = {
    # <= 10 minutes on 2 cores with the default model: one corpus, small budgets
    "demo": {
        "name": "demo",
        "attacks": ["ps", "pm", "mi", "asymmetry"],
        "defenses": ALL_DEFENSES,
        "corpora": ["synthetic-corp"],
        "modes": ["single"],
        "epsilons": [1.0],
        "budgets": {"ps": 3, "pm": 3, "asymmetry": 2},
        "attack_params": {"ps": {"pool": "targeted-pii"},
                          "mi": {"scorers": ["heuristic"], "n_members": 3, "n_nonmembers": 3, "kb_size": 20},
                          "asymmetry": {"keywords": ["wire transfer", "personnel file"], "standard_max_tokens": 96}},
        "corpus_params": {"synthetic-corp": {"n_docs": 30}},
        "stack": {"decoding": {"max_tokens": 128}},
    },
    # 6 attacks x 6 defenses x 3 corpora x 2 modes x 2 eps = 432 cells
    "paper": {
        "name": "paper",
        "attacks": PAPER_ATTACKS,
        "defenses": ALL_DEFENSES,
        "corpora": ["synthetic-corp", "synthetic-email", "chatterbot-qa"],
        "modes": ["single", "multi"],
        "epsilons": [1.0, 5.0],
    },
    # the seed's OOV canary protocol: 3 seeds
    "canary": {
        "name": "canary",
        "attacks": ["canary"],
        "defenses": ["none", "pad-regex", "pad", "lprag"],
        "corpora": ["synthetic-email"],
        "seeds": [0, 1, 2],
    },
}


def preset(name: str) -> GridConfig:
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}; known: {', '.join(PRESETS)}")
    return GridConfig.model_validate(PRESETS[name])


def load_grid_config(path: Path) -> GridConfig:
    return load_yaml_model(path, GridConfig)  # type: ignore[return-value]


def grid_from_dict(raw: dict) -> GridConfig:
    try:
        return GridConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(validation_message(exc, "grid")) from exc
