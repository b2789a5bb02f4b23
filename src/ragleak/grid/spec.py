"""Grid specs: what to run, expanded into cells whose id is a hash of their full spec.

A ``GridConfig`` (YAML or a preset) lists attacks, defenses, corpora, modes and epsilons plus the
stack settings and seeds; ``expand`` validates every name and parameter, then takes the product.
Its ``target`` says what is audited: the built-in stack (the default), or an endpoint of the
user's (an HTTP service or a Python callable, ``config.TargetConfig``). An endpoint runs its own
defense (the defense axis is ``external``, or ``none``) over its own copy of the corpus: the grid's
corpus is the user's copy of what the service indexed, read by the metrics, and an attack that
plants or holds out documents on the built-in stack (canary, MI) reads its ``views`` file instead.
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

from ragleak.config import StackConfig, TargetConfig, load_yaml_model, validation_message
from ragleak.attacks.base import SessionMode
from ragleak.errors import ConfigError
from ragleak.pipeline.rag import DEFAULT_AUDIT_FRACTION, AuditMode, AuditPolicy
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
    target: TargetConfig | None = Field(default=None, description="an endpoint target; None: the built-in stack")
    view: str | None = Field(default=None, description="endpoint targets: the attack's corpus view file")
    view_digest: str | None = Field(default=None, description="SHA-256 of the view file (set by expand)")

    @property
    def cell_id(self) -> str:
        data = self.model_dump(mode="json")
        # an endpoint's identity is where it is and how it is asked (never a timeout, never a
        # secret); the built-in stack's cells keep the ids they had before targets existed
        for key in ("target", "view", "view_digest"):
            if data[key] is None:
                del data[key]
        if self.target is not None:
            data["target"] = self.target.identity
        return digest(data)[:20]

    @property
    def is_endpoint(self) -> bool:
        return self.target is not None and self.target.is_endpoint

    @property
    def epsilon_param(self) -> str | None:
        """The defense parameter the grid's epsilon sets (``Defense.epsilon_param``), or None
        where the axis is inert: no epsilon, a defense without one (none, pad), or an explicit
        value in ``defense_params``, which wins."""
        from ragleak.defenses import defense_class

        if self.epsilon is None:  # before the lookup: a scored transcript's "defense" is a target label
            return None
        param = defense_class(self.defense).epsilon_param
        if param is None or param in self.defense_params:
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
        at = f"@{self.target.label}" if self.is_endpoint else ""  # type: ignore[union-attr]
        return f"{self.attack}/{self.defense}/{self.corpus}/{self.mode}/eps={eps}/seed={self.seed}{at}"


class GridConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(default="grid", description="a label for the run (plan, report titles)")
    attacks: list[str] = Field(min_length=1, description="registered attack names (and probes: `utility` asks "
                               "benign questions, for the utility a defense leaves)")
    defenses: list[str] = Field(min_length=1, description="registered defense names; `none` is the baseline "
                                "every other defense is compared with")
    corpora: list[str] = Field(min_length=1, description="registered corpus names, or paths to the user's files")
    modes: list[SessionMode] = Field(default_factory=lambda: ["single"], min_length=1,
                                     description="single: each query alone; multi: rolling conversations")
    epsilons: list[float | None] = Field(default_factory=lambda: [None], min_length=1, description=(
        "privacy budgets: each sets the defense's `epsilon_param` (inert for a defense without one); null: "
        "the defense's own default"))
    seeds: list[int] = Field(default_factory=lambda: [0], min_length=1,
                             description="run seeds: the attack's and the defense's random streams")
    budget: int | None = Field(default=None, ge=1, description="queries per cell; None = each attack's default")
    budgets: dict[str, Annotated[int, Field(ge=1)]] = Field(
        default_factory=dict, description="per-attack budget, overriding `budget`")
    attack_params: dict[str, dict[str, Any]] = Field(default_factory=dict, description="attack -> its parameters")
    defense_params: dict[str, dict[str, Any]] = Field(default_factory=dict, description="defense -> its parameters "
                                                      "(an epsilon given here wins over the grid's)")
    corpus_params: dict[str, dict[str, Any]] = Field(default_factory=dict, description="corpus -> its parameters")
    stack: StackConfig = StackConfig()
    target: TargetConfig = Field(default_factory=TargetConfig, description="what is audited: the built-in "
                                 "stack (default), an http endpoint or a callable")
    views: dict[str, str] = Field(default_factory=dict, description="endpoint targets: attack -> corpus view JSON "
                                  "(the canary secrets, MI candidates and labels of the copy the service indexed)")
    min_answered_share: float = Field(
        default=DEFAULT_MIN_ANSWERED_SHARE, ge=0.0, le=1.0,
        description="a cell where fewer than this share of queries got a response is 'failed', never 'ok'")
    # Not part of the cell id: the audit's reference generation changes a cell's trace (the
    # generate hook's audited calls), never its answers or metrics; each record states the policy
    # it ran under and how many references it generated, found cached or skipped.
    audit: AuditMode = Field(
        default="sample", description="reference generations of defenses that replace generate: all | sample | off")
    audit_fraction: float = Field(default=DEFAULT_AUDIT_FRACTION, ge=0.0, le=1.0,
                                  description="share of prompts `sample` generates a reference for")

    def audit_policy(self) -> AuditPolicy:
        return AuditPolicy(self.audit, self.audit_fraction)

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

    @model_validator(mode="after")
    def _defenses_fit_target(self) -> "GridConfig":
        from ragleak.defenses import ENDPOINT_DEFENSES

        if self.target.is_endpoint:
            other = [d for d in self.defenses if d not in ENDPOINT_DEFENSES]
            if other:
                raise ValueError(f"an endpoint target runs its own defense; list it as 'external' (or 'none' where "
                                 f"the service runs none), not {', '.join(map(repr, other))}")
        else:
            if "external" in self.defenses:
                raise ValueError("defense 'external' is an endpoint's own defense; the built-in stack runs named ones")
            if self.views:
                raise ValueError("views apply to endpoint targets; the built-in stack plants and splits its own corpus")
        unknown = sorted(set(self.views) - set(self.attacks))
        if unknown:
            raise ValueError(f"views names {', '.join(map(repr, unknown))}, not in the grid's attacks")
        return self

    def expand(self) -> list[CellSpec]:
        """Every cell, after resolving every name and building every parameter model (``ConfigError``
        on the first bad one, before anything is written); each cell pins its corpus digest and
        plugin versions."""
        from ragleak.grid.resolve import Resolver

        resolver = Resolver()
        endpoint = self.target if self.target.is_endpoint else None
        if endpoint is not None:
            resolver.target(endpoint, self.attacks, self.modes, self.views)
        cells = []
        for attack, defense, corpus, mode, eps, seed in itertools.product(
            self.attacks, self.defenses, self.corpora, self.modes, self.epsilons, self.seeds
        ):
            attack_params = self.attack_params.get(attack, {})
            corpus_version, corpus_digest = resolver.corpus(corpus, self.corpus_params.get(corpus, {}))
            view = self.views.get(attack)
            try:
                cell = CellSpec(
                    attack=attack, defense=defense, corpus=corpus, mode=mode, epsilon=eps, seed=seed,
                    budget=self.budgets.get(attack, self.budget), attack_params=attack_params,
                    defense_params=self.defense_params.get(defense, {}),
                    corpus_params=self.corpus_params.get(corpus, {}), stack=self.stack, corpus_digest=corpus_digest,
                    target=endpoint, view=view, view_digest=resolver.view(view) if view else None,
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


# Mind the Hook's six defenses: its "PAD" is its own regex masker for e-mails and identifiers
# (``pad-regex``); Presidio masking stays available under its own name, ``pad``.
PAPER_DEFENSES = ["none", "dp-retrieval", "ca-dp", "private-rag", "pad-regex", "lprag"]
PAPER_ATTACKS = ["ps", "pm", "rag-thief", "ikea", "deal", "mi"]
# MI tests 10 members against 100 non-members per corpus from a 50-document knowledge base, so
# every corpus holds 50 + 100 documents (chatterbot-qa: a seeded subsample of that size).
PAPER_CORPUS_DOCS = 150
PAPER_MI = {"n_members": 10, "n_nonmembers": 100, "kb_size": 50}
# Extraction prompts drawn as Zeng et al. (2024, arXiv 2402.16893) draw theirs: random windows of
# general text (``shared-extraction`` v2), not parts written for our corpora.
GENERAL_POOL = {"pool": "shared-extraction", "pool_version": "2"}
CANARY_SEEDS = [101, 102, 103]

# The MI statistics presets (issue 37): enough candidates to resolve TPR at 1% FPR (300 non-members:
# 3 may score above the threshold) and 100 members; a KB of 150 so the members are a sample of it,
# drawn from the whole corpus in a seeded order (chatterbot-qa is stored by topic: its first 150
# distinct texts are 70% "ai" small talk, the next 300 coding, emotion, literature...).
STATISTICS_MI = {"n_members": 100, "n_nonmembers": 300, "kb_size": 150, "shuffle": True}
# Today's MI (the baseline, 2 queries) beside mi-entailment (one continuation question and one
# reference continuation by the attacker's model) on the same candidates, answers cut at 64 tokens
# (the target echoes the quote before it goes on). Measured on the seed-2 pilots of 80 candidates
# (bench_mi-2026-12-07-continue.json, one run per core): mi-entailment 12.3 CPU-s per candidate on
# synthetic-corp and 5.9 on chatterbot-qa, mi 30.9 and 9.3; at 400 candidates about 1.4 + 3.4 CPU-h
# on synthetic-corp and 0.7 + 1.0 on chatterbot-qa. `--dry-run` prices the preset at ~4.3 h on 2
# workers, and the mi cell on synthetic-corp alone at ~3.4 h: the preset does not finish in one
# 3-hour session. A killed run resumes (`--out` the same folder) and answers every query already
# generated from the cache.
# mi-interrogation (5 queries) and mi-dcmi (2) are left out; run them by --config.
STATISTICS_ATTACKS = ["mi", "mi-entailment"]
STATISTICS_STACK = {"decoding": {"max_tokens": 64}}
# A defense that draws noise is read over 3 seeds, so its run-to-run variance is inside the interval
# (metrics.membership.membership_over_runs); at the paper's 10 + 100 to stay within a session's hours.
STATISTICS_SEEDS = [1, 2, 3]

PRESETS: dict[str, dict[str, Any]] = {
    # <= 10 minutes on 2 cores with the default model: one corpus, small budgets
    "demo": {
        "name": "demo",
        "attacks": ["ps", "pm", "mi", "asymmetry"],
        "defenses": PAPER_DEFENSES,
        "corpora": ["synthetic-corp"],
        "modes": ["single"],
        "epsilons": [1.0],
        "budgets": {"ps": 3, "pm": 3, "asymmetry": 2},
        # prompts that ask for the corpus's own contents, so the masker's effect on the e-mails and
        # phone numbers it removes shows in pii_leaks (the targeted pool's queries name values,
        # which pii_leaks does not count as leaked)
        "attack_params": {"ps": {"pool": "shared-extraction"},
                          "mi": {"scorers": ["heuristic"], "n_members": 3, "n_nonmembers": 3, "kb_size": 20},
                          "asymmetry": {"keywords": ["wire transfer", "personnel file"]}},
        "corpus_params": {"synthetic-corp": {"n_docs": 30}},
        "stack": {"decoding": {"max_tokens": 128}},
    },
    # Mind the Hook's grid: 6 attacks x 6 defenses x 3 corpora x 2 modes x 2 eps = 432 cells. Its
    # third corpus, PubMedQA, needs a file the user supplies; chatterbot-qa (public text) stands in.
    "paper": {
        "name": "paper",
        "attacks": PAPER_ATTACKS,
        "defenses": PAPER_DEFENSES,
        "corpora": ["synthetic-corp", "synthetic-email", "chatterbot-qa"],
        "modes": ["single", "multi"],
        "epsilons": [1.0, 5.0],
        # the paper's shared extraction pool is 10 prompts (Pm: 10 conversations of 3 turns);
        # without a budget a fixed-pool attack sends its whole 250-prompt pool
        "budgets": {"ps": 10, "pm": 30},
        "attack_params": {"ps": GENERAL_POOL, "pm": GENERAL_POOL,
                          "deal": {"seed_pool": "shared-extraction", "seed_pool_version": "2"},
                          "mi": PAPER_MI},
        "corpus_params": {c: {"n_docs": PAPER_CORPUS_DOCS} for c in ("synthetic-corp", "synthetic-email", "chatterbot-qa")},
    },
    # Mind the Hook's OOV canary protocol (section VI-A): seeds 101-103 x 50 targeted queries whose
    # wording shares no word with the carrier sentence (``canary-targeted`` v2)
    "canary": {
        "name": "canary",
        "attacks": ["canary"],
        "defenses": ["none", "pad-regex", "pad", "lprag"],
        "corpora": ["synthetic-email"],
        "seeds": CANARY_SEEDS,
        "budgets": {"canary": 50},
        "attack_params": {"canary": {"pool": "canary-targeted", "pool_version": "2"}},
    },
    # MI at the field's strength, no defense: 100 members + 300 non-members per corpus, one run
    "statistics": {
        "name": "statistics",
        "attacks": STATISTICS_ATTACKS,
        "defenses": ["none"],
        "corpora": ["synthetic-corp", "chatterbot-qa"],
        "attack_params": {"mi": STATISTICS_MI, "mi-entailment": STATISTICS_MI},
        # chatterbot-qa whole: its 2,026 conversations hold 899 distinct texts, and the split drops repeats
        "corpus_params": {"synthetic-corp": {"n_docs": 450}, "chatterbot-qa": {"n_docs": 2026}},
        "stack": STATISTICS_STACK,
    },
    # MI under the defenses that draw noise, 3 seeds each, beside the undefended baseline
    "statistics-dp": {
        "name": "statistics-dp",
        "attacks": ["mi", "mi-entailment"],
        "defenses": ["none", "dp-retrieval", "ca-dp", "private-rag"],
        "corpora": ["synthetic-corp"],
        "seeds": STATISTICS_SEEDS,
        "epsilons": [1.0],
        "attack_params": {"mi": PAPER_MI, "mi-entailment": PAPER_MI},
        "corpus_params": {"synthetic-corp": {"n_docs": PAPER_CORPUS_DOCS}},
    },
}


def budget_lines(grid: GridConfig, cells: list[CellSpec]) -> list[str]:
    """One line per attack: its query budget per cell and what its parameters size (for ``--dry-run``)."""
    from ragleak.attacks import ATTACKS

    out = []
    for attack in grid.attacks:
        budget = grid.budgets.get(attack, grid.budget)
        shown = f"{budget} queries" if budget else f"default {ATTACKS.get(attack).default_budget} queries"
        params = grid.attack_params.get(attack, {})
        extra = ", ".join(f"{k}={v}" for k, v in sorted(params.items()))
        n = sum(1 for c in cells if c.attack == attack)
        out.append(f"{attack}: {n} cells x {shown} per cell" + (f" ({extra})" if extra else ""))
    if grid.corpus_params:
        out.append("corpora: " + ", ".join(f"{c} ({', '.join(f'{k}={v}' for k, v in sorted(p.items()))})"
                                           for c, p in grid.corpus_params.items()))
    out.append(f"seeds: {', '.join(map(str, grid.seeds))}")
    return out


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
