"""Source access for the static inventory: parsed files, stub-marker comments, imported modules.

Files are parsed once per (path, mtime); ``stub_comments`` finds stub-marker comments with
``tokenize`` (comments are not in the AST). ``module_source`` finds the source of an imported module without importing it (the standard
library and installed packages are not followed).
"""

from __future__ import annotations

import ast
import functools
import io
import logging
import os
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

from ragleak.audit import markers
from ragleak.errors import RagleakError

log = logging.getLogger(__name__)


class AuditError(RagleakError):
    """The audit target cannot be read: an unknown defense, a missing file, unreadable traces."""


@dataclass(frozen=True, eq=False)  # compared and hashed by identity: one parse per file version
class Module:
    path: str
    lines: list[str]
    tree: ast.Module
    patterns: frozenset[str]
    classes: dict[str, ast.ClassDef]
    imports: dict[str, tuple[str, str]]  # local name -> (module, attribute) of `from M import a`
    functions: dict[str, ast.FunctionDef] = field(default_factory=dict)  # top-level defs
    aliases: dict[str, str] = field(default_factory=dict)  # local name -> module of `import M as n`
    constants: dict[str, ast.expr] = field(default_factory=dict)  # top-level names bound exactly once


@functools.lru_cache(maxsize=128)
def _parse(path: str, mtime: float) -> Module:
    text = Path(path).read_text(encoding="utf-8")
    try:
        tree = ast.parse(text, filename=path)
    except SyntaxError as exc:
        raise AuditError(f"{path}:{exc.lineno}: cannot parse: {exc.msg}") from None
    patterns, classes, imports = set(), {}, {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            classes.setdefault(node.name, node)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                imports[alias.asname or alias.name] = (node.module, alias.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None and _compiles_pattern(node.value):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                name = target.id if isinstance(target, ast.Name) else getattr(target, "attr", None)
                if name:
                    patterns.add(name)
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    aliases = {a.asname or a.name: a.name for n in tree.body if isinstance(n, ast.Import) for a in n.names}
    return Module(path, text.splitlines(), tree, frozenset(patterns), classes, imports, functions, aliases,
                  _top_level_constants(tree))


def _top_level_constants(tree: ast.Module) -> dict[str, ast.expr]:
    """Top-level names bound by exactly one plain assignment and never rebound (`global` included)."""
    bound: dict[str, list[ast.expr | None]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            for name in node.names:
                bound.setdefault(name, []).append(None)
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    bound.setdefault(target.id, []).append(node.value)
        elif isinstance(node, (ast.AugAssign, ast.For, ast.With)):
            for sub in ast.walk(node):
                if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                    bound.setdefault(sub.id, []).append(None)
    return {name: values[0] for name, values in bound.items() if len(values) == 1 and values[0] is not None}


def _is_library(path: str) -> bool:
    """The standard library and installed third-party packages are not followed (unknown calls)."""
    import sysconfig

    roots = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    resolved = str(Path(path).resolve())
    return any(resolved.startswith(str(Path(r).resolve()) + os.sep) for r in roots if r)


def module_source(name: str) -> "Module | None":
    """The parsed source of importable module ``name``, found without importing it; None when unavailable."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    origin = getattr(spec, "origin", None) if spec is not None else None
    if not origin or not origin.endswith(".py") or not Path(origin).is_file() or _is_library(origin):
        return None
    try:
        return load_module(origin)
    except AuditError:
        return None


def load_module(path: str | os.PathLike) -> Module:
    path = str(Path(path).resolve())
    if not Path(path).is_file():
        raise AuditError(f"no such file: {path}")
    return _parse(path, Path(path).stat().st_mtime)


def _compiles_pattern(value: ast.expr) -> bool:
    for node in ast.walk(value):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "compile" \
                and isinstance(node.func.value, ast.Name) and node.func.value.id in markers.REGEX_MODULES:
            return True
    return False


def where(path: str, line: int) -> str:
    try:
        rel = os.path.relpath(path)
        path = rel if not rel.startswith("..") else path
    except ValueError:
        pass
    return f"{path}:{line}"


def stub_comments(module: Module, func: ast.FunctionDef) -> list[tuple[int, str]]:
    """Stub markers in ``func``'s comments, its docstring, or the comment block right above it."""
    start = min([func.lineno] + [d.lineno for d in func.decorator_list])
    found = []
    above = start - 2  # 0-based index of the line above the def/decorators
    while above >= 0 and module.lines[above].strip().startswith("#"):
        found.append((above + 1, module.lines[above].strip()))
        above -= 1
    span = "\n".join(module.lines[start - 1: func.end_lineno]) + "\n"
    try:
        for tok in tokenize.generate_tokens(io.StringIO(span).readline):
            if tok.type == tokenize.COMMENT:
                found.append((start + tok.start[0] - 1, tok.string))
    except (tokenize.TokenError, IndentationError):
        found.extend((start + i, line.strip()) for i, line in enumerate(span.splitlines()) if "#" in line)
    doc = ast.get_docstring(func)
    if doc:
        found.extend((func.body[0].lineno, f"docstring: {line.strip()}") for line in doc.splitlines())
    return [(line, text) for line, text in found
            if markers.STUB_COMMENT.search(text.removeprefix("docstring:").lstrip("#").strip())]


def literal_strings(value: ast.expr) -> list[str] | None:
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and \
            value.func.id in {"frozenset", "set", "tuple", "list"}:
        if not value.args:
            return []
        value = value.args[0]
    if isinstance(value, (ast.Set, ast.List, ast.Tuple)):
        items = [e.value for e in value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        return items if len(items) == len(value.elts) else None
    return None


def class_attr(cls: ast.ClassDef, attr: str) -> ast.expr | None:
    for node in cls.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == attr for t in node.targets):
            return node.value
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == attr:
            return node.value
    return None


def method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    return next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == name), None)
