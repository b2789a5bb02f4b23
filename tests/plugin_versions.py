"""The recorded source digest of every built-in plugin, so a behaviour change cannot ship without
a ``version`` bump (grid cell ids cover plugin versions; an unbumped change would mix old and new
results under one id).

Refresh the record after bumping (or after deciding a change does not alter behaviour)::

    make plugin-versions        # or: PYTHONPATH=src python tests/plugin_versions.py

The digest is over the plugin's own source: the module defining its class, or, for a plugin
living in its own subpackage (``ragleak.attacks.asymmetry``), every module of that subpackage.
It is taken over the syntax tree without docstrings, comments or layout, so rewording a comment
needs no bump, and it is stable across Python versions (only non-empty AST fields are written).
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import inspect
import json
import sys
from pathlib import Path
from typing import Any

RECORD = Path(__file__).with_name("plugin_versions.json")
KINDS = ("attacks", "defenses", "metrics", "corpora")


def _canonical(node: Any) -> Any:
    if isinstance(node, ast.AST):
        fields = [(name, _canonical(value)) for name, value in ast.iter_fields(node) if value not in (None, [])]
        return [type(node).__name__, fields]
    if isinstance(node, list):
        return [_canonical(item) for item in node]
    return repr(node)


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return tree


def source_digest(source: str) -> str:
    """SHA-256 of ``source``'s syntax tree, docstrings, comments and layout left out."""
    tree = _strip_docstrings(ast.parse(source))
    return hashlib.sha256(json.dumps(_canonical(tree)).encode("utf-8")).hexdigest()


def plugin_modules(cls: type, kind: str) -> list[str]:
    """The modules that make up the plugin ``cls`` of ``kind`` (see the module docstring)."""
    module = cls.__module__
    package = module.rpartition(".")[0]
    if package == f"ragleak.{kind}":
        return [module]
    parent = importlib.import_module(package)
    return sorted(f"{package}.{p.stem}" for p in Path(parent.__file__).parent.glob("*.py"))


def plugin_digest(cls: type, kind: str) -> str:
    parts = [source_digest(inspect.getsource(importlib.import_module(m))) for m in plugin_modules(cls, kind)]
    return hashlib.sha256("\n".join(parts).encode("utf-8")).hexdigest()


def current() -> dict[str, dict[str, dict[str, str]]]:
    """kind -> name -> {version, source_digest} for every built-in (``ragleak.``) plugin."""
    table: dict[str, dict[str, dict[str, str]]] = {}
    for kind in KINDS:
        registry = getattr(importlib.import_module(f"ragleak.{kind}"), kind.upper())
        table[kind] = {}
        for name in registry.names():
            cls = registry.get(name)
            if cls.__module__.startswith("ragleak."):  # third-party plugins version themselves
                table[kind][name] = {"version": str(cls.version), "source_digest": plugin_digest(cls, kind)}
    return table


def problems(recorded: dict, now: dict) -> list[str]:
    """What differs between the record and the code, one line per plugin, saying what to do."""
    out = []
    refresh = f"then refresh {RECORD.name} (make plugin-versions)"
    for kind in KINDS:
        old, new = recorded.get(kind, {}), now.get(kind, {})
        for name in sorted(set(old) | set(new)):
            if name not in old:
                out.append(f"{kind} {name!r} is new: {refresh}")
            elif name not in new:
                out.append(f"{kind} {name!r} is no longer registered: {refresh}")
            elif old[name]["source_digest"] != new[name]["source_digest"] and old[name]["version"] == new[name]["version"]:
                out.append(f"{kind} {name!r}: its source changed but its `version` is still {new[name]['version']!r}; "
                           f"bump `version` if its behaviour changed (cell ids cover it), {refresh}")
            elif old[name] != new[name]:
                out.append(f"{kind} {name!r}: version {old[name]['version']!r} -> {new[name]['version']!r}; {refresh}")
    return out


def main() -> None:
    RECORD.write_text(json.dumps(current(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    sys.stdout.write(f"wrote {RECORD}\n")


if __name__ == "__main__":
    main()
