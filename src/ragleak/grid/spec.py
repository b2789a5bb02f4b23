"""Grid specs: what to run, expanded into cells whose id is a hash of their full spec.

A ``GridConfig`` (YAML or a preset) lists attacks, defenses, corpora, modes and epsilons plus the
stack settings and seeds; ``expand`` validates every name and parameter, then takes the product.
Every cell carries its *complete* spec: the stack config, the digest of its corpus's documents
and the declared version of every plugin it runs (attack, defense, corpus, metrics). So its id
changes whenever anything that could change its result changes (an edited corpus file, a
plugin whose behaviour changed), and a rerun skips exactly the cells already finished.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ragleak.config import StackConfig, load_yaml_model, validation_message
from ragleak.attacks.base import SessionMode
from ragleak.errors import ConfigError
from ragleak.records import digest

#: A cell where fewer than this share of queries got a response is ``failed`` (grid.store).
DEFAULT_MIN_ANSWERED_SHARE = 0.8


class CellSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    attack: str
    defense: str
    corpus: str
    mode: SessionMode = "single"
    epsilon: float | None = None
    seed: int = 0
    budget: int | None = Field(default=None, ge=1)
    attack_params: dict[str, Any] = Field(default_factory=dict)
    defense_params: dict[str, Any] = Field(default_factory=dict)
    corpus_params: dict[str, Any] = Field(default_factory=dict)
    stack: StackConfig = StackConfig()
    corpus_digest: str | None = Field(default=None, description="SHA-256 of the corpus's documents (set by expand)")
    versions: dict[str, str] = Field(
        default_factory=dict, description="'attack:ps', 'defense:none', 'corpus:files', 'metric:NAME' -> declared version")

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

    def defense_kwargs(self) -> dict[str, Any]:
        """The defense's constructor parameters: ``defense_params`` plus the grid epsilon where it applies."""
        params = dict(self.defense_params)
        if self.epsilon_param is not None:
            params[self.epsilon_param] = self.epsilon
        return params

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
    modes: list[SessionMode] = Field(default_factory=lambda: ["single"], min_length=1)
    epsilons: list[float | None] = Field(default_factory=lambda: [None], min_length=1)
    seeds: list[int] = Field(default_factory=lambda: [0], min_length=1)
    budget: int | None = Field(default=None, ge=1, description="queries per cell; None = each attack's default")
    budgets: dict[str, Annotated[int, Field(ge=1)]] = Field(
        default_factory=dict, description="per-attack budget, overriding `budget`")
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

    @model_validator(mode="after")
    def _keys_name_axis_values(self) -> "GridConfig":
        # a per-plugin setting for a plugin the grid does not run is a typo that would silently do nothing
        for field, axis in (("budgets", "attacks"), ("attack_params", "attacks"),
                            ("defense_params", "defenses"), ("corpus_params", "corpora")):
            unknown = sorted(set(getattr(self, field)) - set(getattr(self, axis)))
            if unknown:
                raise ValueError(f"{field} names {', '.join(map(repr, unknown))}, not in the grid's {axis} "
                                 f"({', '.join(getattr(self, axis))})")
        return self

    def expand(self) -> list[CellSpec]:
        """Every cell, after resolving every name and building every parameter model (``ConfigError``
        on the first bad one, before anything is written); each cell pins its corpus digest and
        plugin versions."""
        from ragleak.grid.resolve import Resolver

        resolver = Resolver()
        cells = []
        for attack, defense, corpus, mode, eps, seed in itertools.product(
            self.attacks, self.defenses, self.corpora, self.modes, self.epsilons, self.seeds
        ):
            attack_params = self.attack_params.get(attack, {})
            corpus_version, corpus_digest = resolver.corpus(corpus, self.corpus_params.get(corpus, {}))
            try:
                cell = CellSpec(
                    attack=attack, defense=defense, corpus=corpus, mode=mode, epsilon=eps, seed=seed,
                    budget=self.budgets.get(attack, self.budget), attack_params=attack_params,
                    defense_params=self.defense_params.get(defense, {}),
                    corpus_params=self.corpus_params.get(corpus, {}), stack=self.stack, corpus_digest=corpus_digest,
                )
            except ValidationError as exc:
                raise ConfigError(validation_message(exc, f"grid cell {attack}/{defense}/{corpus}")) from exc
            versions = {f"attack:{attack}": resolver.attack(attack, attack_params),
                        f"defense:{defense}": resolver.defense(defense, cell.defense_kwargs()),
                        f"corpus:{corpus}": corpus_version, **resolver.metrics()}
            cells.append(cell.model_copy(update={"versions": versions}))
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
                          "asymmetry": {"keywords": ["wire transfer", "personnel file"]}},
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
