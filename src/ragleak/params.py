"""One way to build a plugin's frozen ``Params`` from a constructor call (attacks, defenses,
corpora): either a ``Params`` instance or keyword parameters, never both; an invalid value is a
``ConfigError`` naming the parameter, so a bad grid config or CLI flag fails in one clear line."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

from ragleak.errors import ConfigError


def params_message(exc: ValidationError, source: str) -> str:
    """One line naming the first invalid parameter, for a ``ConfigError``."""
    first = exc.errors()[0]
    field = ".".join(str(part) for part in first["loc"]) or "(parameters)"
    more = f" (and {len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""
    return f"{source}: invalid parameter '{field}': {first['msg']}{more}"


def build_params(owner: type, kind: str, params: BaseModel | None, kwargs: dict[str, Any]) -> BaseModel:
    """``owner.Params`` from ``params`` or ``kwargs``; ``kind`` ('attack', 'defense', 'corpus') names
    the plugin in the error message."""
    expected: type[BaseModel] = owner.Params  # type: ignore[attr-defined]
    if params is not None and kwargs:
        raise TypeError("pass either a Params instance or keyword parameters, not both")
    if params is None:
        try:
            return expected(**kwargs)
        except ValidationError as exc:
            raise ConfigError(params_message(exc, f"{kind} {getattr(owner, 'name', owner.__name__)!r}")) from exc
    if not isinstance(params, expected):
        raise TypeError(f"{owner.__name__} expects {expected.__name__}, got {type(params).__name__}")
    return params
