"""Validate a grid before anything runs: resolve every name, build every parameter model, and
pin what each cell's id must cover beyond its config (the corpus content, the plugin versions).

``GridConfig.expand`` calls ``Resolver`` for each cell; a bad name or parameter is one
``ConfigError`` raised before a run folder exists. Every (plugin, parameters) pair is checked
once per grid, and each corpus is loaded once to digest its documents.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragleak.config import TargetConfig
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
        """The defense's declared version, after constructing it with ``params`` (epsilon included);
        a ``file.py:Class`` defense's version also carries a digest of its file."""
        from ragleak.defenses import DEFENSES, defense_class
        from ragleak.defenses.loader import defense_source_digest

        version = self._plugin("defense", DEFENSES, name, params, lookup=defense_class)
        source = defense_source_digest(name)
        return version if source is None else f"{version}+sha256:{source[:16]}"

    def _plugin(self, kind: str, registry, name: str, params: dict[str, Any], lookup=None) -> str:
        def check() -> str:
            cls = (lookup or registry.get)(name)
            # constructors store validated parameters only (the plugin contract): cheap to build
            _build(kind, name, lambda: cls(**params))
            return cls.version

        return self._once((kind, name, params), check)

    def target(self, target: TargetConfig, attacks: list[str], modes: list[str], views: dict[str, str]) -> None:
        """Check that every attack can be run against the endpoint ``target`` as configured: a view
        for each attack that otherwise plants or holds out documents itself, retrieved ids for an
        attack that needs them, a request that carries the history in multi-turn mode, and (for a
        callable) that it imports."""
        from ragleak.attacks import ATTACKS
        from ragleak.attacks.base import Attack
        from ragleak.pipeline.target import load_callable, template_sends_history

        if target.kind == "callable":
            load_callable(target.callable)  # type: ignore[arg-type]
        exposes_ids = target.retrieved_ids_path is not None if target.kind == "http" else target.exposes_retrieved_ids
        for name in attacks:
            cls = ATTACKS.get(name)
            if cls.prepare_corpus is not Attack.prepare_corpus and name not in views:
                raise ConfigError(f"attack {name!r} against an endpoint needs views.{name}: a corpus view JSON of the "
                                  "copy the service indexed (its canaries, or MI candidates and labels)")
            if cls.threat_model == "needs-retrieved-ids" and not exposes_ids:
                raise ConfigError(f"attack {name!r} needs retrieved ids; set target.retrieved_ids_path "
                                  "(the JSON path to the source ids in the response)")
        if "multi" in modes and target.kind == "http" and not template_sends_history(target.shape,
                                                                                     target.request_template):
            raise ConfigError("mode 'multi' needs a request that carries the history: put \"{history}\" or "
                              "\"{messages}\" in target.request_template, or use shape: openai")

    def view(self, path: str) -> str:
        """The SHA-256 of a corpus view file, after checking that it is one."""
        from ragleak.attacks.views import read_view
        from ragleak.files import sha256_file

        def check() -> str:
            read_view(path)
            return sha256_file(Path(path))

        return self._once(("view", path), check)

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
