"""Validate a grid before anything runs: resolve every name, build every parameter model, and
pin what each cell's id must cover beyond its config (the corpus content, the plugin versions).

``GridConfig.expand`` calls ``Resolver`` for each cell; a bad name or parameter is one
``ConfigError`` raised before a run folder exists. Every (plugin, parameters) pair is checked
once per grid, and each corpus is loaded once to digest its documents.
"""

from __future__ import annotations

from typing import Any

from ragleak.errors import ConfigError, RagleakError
from ragleak.records import canonical_json


def _build(kind: str, name: str, make) -> Any:
    """``make()``; any failure becomes one line that names the plugin."""
    prefix = f"{kind} {name!r}"
    try:
        return make()
    except RagleakError as exc:
        if str(exc).startswith(prefix):
            raise
        raise type(exc)(f"{prefix}: {exc}") from exc
    except Exception as exc:  # a plugin constructor rejecting its parameters (ValueError, TypeError, ...)
        raise ConfigError(f"{prefix}: invalid parameters: {type(exc).__name__}: {exc}") from exc


class Resolver:
    """Checks plugins and digests corpora for one grid, memoised per (name, parameters)."""

    def __init__(self) -> None:
        self._seen: dict[str, Any] = {}
        self._metric_versions: dict[str, str] | None = None

    def _once(self, key: tuple, compute) -> Any:
        text = canonical_json(list(key))
        if text not in self._seen:
            self._seen[text] = compute()
        return self._seen[text]

    def attack(self, name: str, params: dict[str, Any]) -> str:
        """The attack's declared version, after building its ``Params``."""
        from ragleak.attacks import ATTACKS

        return self._plugin("attack", ATTACKS, name, params)

    def defense(self, name: str, params: dict[str, Any]) -> str:
        """The defense's declared version, after constructing it with ``params`` (epsilon included)."""
        from ragleak.defenses import DEFENSES

        return self._plugin("defense", DEFENSES, name, params)

    def _plugin(self, kind: str, registry, name: str, params: dict[str, Any]) -> str:
        def check() -> str:
            cls = registry.get(name)
            # constructors store validated parameters only (the plugin contract): cheap to build
            _build(kind, name, lambda: cls(**params))
            return cls.version

        return self._once((kind, name, params), check)

    def corpus(self, name: str, params: dict[str, Any]) -> tuple[str, str]:
        """The corpus's declared version and the digest of every document it loads."""
        from ragleak.corpora import documents_digest, load_corpus, make_corpus

        def check() -> tuple[str, str]:
            version = _build("corpus", name, lambda: make_corpus(name, **params)).version
            documents = _build("corpus", name, lambda: load_corpus(name, **params))
            return version, documents_digest(documents)

        return self._once(("corpus", name, params), check)

    def metrics(self) -> dict[str, str]:
        """``metric:NAME`` -> declared version of every registered metric (a cell computes each that applies)."""
        if self._metric_versions is None:
            from ragleak.metrics import METRICS

            self._metric_versions = {f"metric:{n}": METRICS.get(n).version for n in METRICS.names()}
        return self._metric_versions
