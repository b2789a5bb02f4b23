"""Versioned query pools, shipped as package data under ``ragleak/data/attacks/NAME.vVERSION.json``.

A pool file holds ``name``, ``version``, ``description``, ``construction`` (how its queries were
built) and ``items`` (the queries, in order). Pools are data, not code, so a result can name
exactly which queries produced it and a changed pool gets a new version instead of silently
changing old results.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

from typing import TypeVar

from pydantic import Field

from ragleak.errors import ConfigError
from ragleak.records import Record

R = TypeVar("R", bound=Record)


class QueryPool(Record):
    name: str
    version: str
    description: str
    construction: str
    items: list[str] = Field(min_length=1)


def _pool_dir():
    return resources.files("ragleak").joinpath("data", "attacks")


def load_packaged(folder: str | None, name: str, version: str, model: type[R], what: str) -> R:
    """The packaged file ``ragleak/data/attacks[/folder]/NAME.vVERSION.json`` read as ``model``
    (a record with ``name`` and ``version``, which must be the ones asked for); ``ConfigError``
    naming ``what`` (e.g. "query pool") and what is packaged if there is none."""
    where = _pool_dir() if folder is None else _pool_dir().joinpath(folder)
    entry = where.joinpath(f"{name}.v{version}.json")
    if not entry.is_file():
        known = sorted(e.name.removesuffix(".json") for e in where.iterdir() if e.name.endswith(".json"))
        raise ConfigError(f"no {what} {name!r} version {version!r}; packaged: {', '.join(known)}")
    found = model.model_validate(json.loads(entry.read_text(encoding="utf-8")))
    if (found.name, found.version) != (name, version):  # type: ignore[attr-defined]
        raise ConfigError(f"{what} file {entry.name} declares {found.name}@{found.version}")  # type: ignore[attr-defined]
    return found


def pool_names() -> list[str]:
    """Every packaged pool as ``NAME@VERSION``."""
    out = []
    for entry in _pool_dir().iterdir():
        stem = entry.name.removesuffix(".json")
        if entry.name.endswith(".json") and ".v" in stem:
            name, _, version = stem.rpartition(".v")
            out.append(f"{name}@{version}")
    return sorted(out)


@lru_cache(maxsize=None)
def load_pool(name: str, version: str = "1") -> QueryPool:
    """The packaged pool ``name`` at ``version``; ``ConfigError`` if there is none."""
    if not _pool_dir().joinpath(f"{name}.v{version}.json").is_file():
        raise ConfigError(f"no query pool {name!r} version {version!r}; packaged: {', '.join(pool_names())}")
    return load_packaged(None, name, version, QueryPool, "pool")
