"""Lazy plugin registries.

Each plugin kind has one ``Registry`` (``ATTACKS``, ``DEFENSES``, ``METRICS``, ``CORPORA``, in
their packages' ``__init__``) mapping a public name to a ``"module:attribute"`` string. Nothing is imported until a name is
looked up, so listing plugins is cheap and a broken optional plugin cannot break the others.
Third-party plugins register the same way, through the ``ragleak.<kind>`` entry-point group.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Generic, TypeVar

from ragleak.errors import ConfigError

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, kind: str, entries: dict[str, str]) -> None:
        self.kind = kind
        self._entries = dict(entries)
        self._loaded: dict[str, T] = {}
        self._plugins_scanned = False

    def register(self, name: str, target: str) -> None:
        """Register ``name`` -> ``"module:attribute"``; a name may be registered once."""
        if name in self._entries and self._entries[name] != target:
            raise ValueError(f"{self.kind} {name!r} is already registered as {self._entries[name]}")
        self._entries[name] = target

    def unregister(self, name: str) -> None:
        """Forget ``name`` (a plugin registered for one test or session); unknown names are ignored."""
        self._entries.pop(name, None)
        self._loaded.pop(name, None)

    def names(self) -> list[str]:
        self._scan_plugins()
        return sorted(self._entries)

    def get(self, name: str) -> T:
        self._scan_plugins()
        if name not in self._entries:
            known = ", ".join(sorted(self._entries)) or "none"
            raise ConfigError(f"unknown {self.kind} {name!r}; known: {known}")
        if name not in self._loaded:
            module_name, _, attribute = self._entries[name].partition(":")
            self._loaded[name] = getattr(importlib.import_module(module_name), attribute)
        return self._loaded[name]

    def _scan_plugins(self) -> None:
        if self._plugins_scanned:
            return
        self._plugins_scanned = True
        for ep in entry_points(group=f"ragleak.{self.kind}"):
            self._entries.setdefault(ep.name, ep.value)
