"""Validated configuration. YAML in, pydantic models out; a bad value names its field."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ragleak.errors import ConfigError
from ragleak.rag.generator import DecodingParams
from ragleak.rag.models import DEFAULT_MODEL, MODELS
from ragleak.rag.prompt import DEFAULT_SYSTEM_PROMPT


class StackConfig(BaseModel):
    """The RAG stack under audit."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = DEFAULT_MODEL
    embedder: str = "all-MiniLM-L6-v2"
    top_k: int = Field(default=5, ge=1, le=50)
    candidate_k: int = Field(default=20, ge=1, le=1000, description="candidates scored before top-k selection")
    chunk_words: int = Field(default=120, ge=8, le=4000)
    chunk_overlap: int = Field(default=20, ge=0)
    seed: int = 0
    n_threads: int | None = Field(default=None, ge=1, le=256)
    n_ctx: int | None = Field(default=None, ge=256, le=32768)
    decoding: DecodingParams = DecodingParams()
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    cache_path: Path | None = Field(default=None, description="generation cache (SQLite); default under RAGLEAK_HOME")
    use_cache: bool = True

    @field_validator("model")
    @classmethod
    def _known_model(cls, value: str) -> str:
        if value not in MODELS:
            raise ValueError(f"unknown model {value!r}; known: {', '.join(MODELS)}")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> "StackConfig":
        if self.chunk_overlap >= self.chunk_words:
            raise ValueError(f"chunk_overlap ({self.chunk_overlap}) must be smaller than chunk_words ({self.chunk_words})")
        if self.candidate_k < self.top_k:
            raise ValueError(f"candidate_k ({self.candidate_k}) must be at least top_k ({self.top_k})")
        return self


def validation_message(exc: ValidationError, source: str) -> str:
    first = exc.errors()[0]
    field = ".".join(str(part) for part in first["loc"]) or "(top level)"
    more = f" (and {len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""
    return f"{source}: invalid field '{field}': {first['msg']}{more}"


def load_yaml_model(path: Path, model: type[BaseModel], section: str | None = None) -> BaseModel:
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"config file {path} does not exist") from exc
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    if raw is None:
        raw = {}
    if section is not None and isinstance(raw, dict) and section in raw:
        raw = raw[section]
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping of settings, got {type(raw).__name__}")
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(validation_message(exc, str(path))) from exc


def load_stack_config(path: Path | None = None, **overrides) -> StackConfig:
    """The stack config from a YAML file (top level, or its ``stack:`` section), with overrides."""
    base = load_yaml_model(path, StackConfig, section="stack") if path else StackConfig()
    if not overrides:
        return base  # type: ignore[return-value]
    try:
        return StackConfig.model_validate({**base.model_dump(), **overrides})
    except ValidationError as exc:
        raise ConfigError(validation_message(exc, "options")) from exc
