"""Validated configuration. YAML in, pydantic models out; a bad value names its field."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ragleak.errors import ConfigError
from ragleak.rag.generator import DecodingParams
from ragleak.rag.models import DEFAULT_MODEL, MODELS
from ragleak.rag.prompt import DEFAULT_SYSTEM_PROMPT
from ragleak.rag.redact import literal_secrets


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


#: How a request to an HTTP target is shaped: ``json`` posts ``request_template`` (default
#: ``{"query": "{query}", "history": "{history}"}``) and reads ``answer``; ``openai`` posts an
#: OpenAI chat-completions body (the history as user/assistant ``messages``) and reads
#: ``choices[0].message.content``.
RequestShape = Literal["json", "openai"]
_CALLABLE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


class TargetConfig(BaseModel):
    """What a grid audits: the built-in stack (``kind: stack``, the default), an HTTP endpoint
    (``kind: http``) or a Python callable (``kind: callable``, ``module:function``).

    Credentials never enter a config, a cell id or a record: a credential-carrying header or URL
    part must name an environment variable (``Authorization: Bearer $env:RAG_TOKEN``), read only
    when the target is built in the cell that queries it.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["stack", "http", "callable"] = "stack"
    url: str | None = Field(default=None, description="http: the endpoint the requests are POSTed to")
    callable: str | None = Field(default=None, description="callable: 'module:function' (query[, history]) -> answer")
    shape: RequestShape = "json"
    request_template: str | None = Field(default=None, description="json shape: the JSON body, with {query} "
                                         "(and {history} or {messages}); default per shape")
    answer_path: str | None = Field(default=None, description="JSON path to the answer; default per shape")
    retrieved_ids_path: str | None = Field(default=None, description="JSON path to the source ids in the response")
    api_model: str | None = Field(default=None, description="openai shape: the request's 'model' field")
    system_prompt: str | None = Field(default=None, description="openai shape: a system message sent first")
    headers: dict[str, str] = Field(default_factory=dict, description="HTTP headers; values may use $env:NAME")
    exposes_retrieved_ids: bool = Field(default=False, description="callable: it returns retrieved ids")
    timeout_s: float = Field(default=60.0, gt=0, description="seconds per HTTP attempt")
    retries: int = Field(default=2, ge=0, description="retries after a connection error, timeout, 5xx or 429")
    backoff_s: float = Field(default=0.5, ge=0, description="first retry delay, doubling")
    stop_after_failures: int = Field(default=5, ge=0, description="stop a cell after this many failed queries "
                                     "in a row (0: never)")
    max_error_rate: float = Field(default=0.5, gt=0, le=1, description="stop a cell when more than this share "
                                  "of the last error_window queries failed")
    error_window: int = Field(default=20, ge=0, description="queries the error rate is read over (0: never)")

    @model_validator(mode="after")
    def _consistent(self) -> "TargetConfig":
        if self.kind == "http" and not self.url:
            raise ValueError("an http target needs a url")
        if self.kind == "callable" and not (self.callable and _CALLABLE.match(self.callable)):
            raise ValueError(f"a callable target needs callable: 'module:function', got {self.callable!r}")
        if self.kind != "http" and (self.url or self.headers):
            raise ValueError(f"url and headers apply to http targets, not {self.kind!r}")
        if self.kind != "callable" and self.callable:
            raise ValueError(f"callable applies to callable targets, not {self.kind!r}")
        if self.kind == "stack" and (self.retrieved_ids_path or self.request_template or self.answer_path):
            raise ValueError("request settings apply to http targets, not the built-in stack")
        if self.shape == "openai" and self.request_template:
            raise ValueError("the openai shape builds its own request body; give request_template with shape json")
        literal = literal_secrets(self.url or "", self.headers)
        if literal:
            raise ValueError(f"{', '.join(literal)} holds a credential literally; write it as $env:NAME "
                             "(e.g. 'Bearer $env:RAG_TOKEN') so that it is read from the environment, never stored")
        return self

    @property
    def is_endpoint(self) -> bool:
        """Whether the target is a service of the user's (http or callable), not the built-in stack."""
        return self.kind != "stack"

    @property
    def identity(self) -> dict[str, Any]:
        """What a cell id covers: where the target is and how it is asked. Timeouts, retries and
        the stop rule are left out, so a rerun with a longer timeout resumes the same cells."""
        return self.model_dump(mode="json", exclude={"timeout_s", "retries", "backoff_s", "stop_after_failures",
                                                      "max_error_rate", "error_window"})

    @property
    def label(self) -> str:
        return self.url or self.callable or "stack"  # type: ignore[return-value]


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
