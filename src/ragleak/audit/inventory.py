"""Static hook inventory: for each defense class and each of the four hooks, what the code does.

Statuses (per hook):

* ``not-overridden``: the class inherits the base ``Defense`` identity;
* ``inactive``: overridden, but what it passes on cannot differ in content from its input (the
  dataflow of ``astflow``), or it releases the retrieved context verbatim, or the body is
  ``pass``/``...``/a docstring, raises ``NotImplementedError``, or carries a stub-marker comment
  (``markers.STUB_COMMENT``; comments are read with ``tokenize`` over the hook's own lines and
  the comment block right above its ``def``);
* ``pattern-limited``: it changes content only where a narrow pattern matches (the pattern is kept);
* ``active``: it can change content, with the evidence that shows how;
* ``undetermined``: the analysis cannot decide (the reason is kept); the dynamic trace decides.

A hook inherited from another defense class is analysed in the audited class's method
resolution order (``self.m()`` and ``super()`` resolve as they would at run time; the finding
says where the hook is defined). Works on an importable class (``inventory_class``) or on a
``.py`` file read without importing it (``inventory_file``). Each finding carries evidence and a
``file:line`` location; ``strict=True`` raises ``StubHookError`` when any finding is a problem:
an inactive override, a declared hook left undetermined, or a hook listed in ``hooks`` that the
class does not implement.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ragleak.audit.astflow import BodyVerdict, Scope, analyse_function
from ragleak.audit.source import (
    AuditError,
    Module,
    class_attr,
    literal_strings,
    load_module,
    method,
    stub_comments,
    where,
)


from ragleak.errors import RagleakError
from ragleak.records import HOOK_NAMES, HookName, Record

log = logging.getLogger(__name__)

__all__ = ["ACTIVE_STATUSES", "AuditError", "DefenseInventory", "HookFinding", "HookStatus", "StubHookError",
           "inventory_class", "inventory_file", "inventory_of", "load_registered"]

HookStatus = Literal["not-overridden", "inactive", "pattern-limited", "active", "undetermined"]
ACTIVE_STATUSES: frozenset[str] = frozenset({"active", "pattern-limited"})


def analyse(module: Module, func: ast.FunctionDef, hook: str, scope: Scope | None = None,
            owner: int = -1) -> BodyVerdict:
    """The static verdict of one hook implementation, stub-marker comments included."""
    try:
        verdict = analyse_function(module, func, hook, scope, owner)
    except Exception as exc:  # noqa: BLE001 - a user's odd code is undetermined, never a crash or "active"
        log.warning("the dataflow analysis of %s at %s:%d failed: %s: %s", hook, module.path, func.lineno,
                    type(exc).__name__, exc)
        verdict = BodyVerdict("undetermined", None, f"the analysis failed ({type(exc).__name__}: {exc})",
                              func.lineno, f"{module.path}:{func.lineno}")
    comments = stub_comments(module, func)
    if comments:
        c_line, c_text = comments[0]
        note = f"stub marker at line {c_line}: `{c_text}`"
        return BodyVerdict("inactive", "stub-comment", f"{note} (the code alone: {verdict.status}, {verdict.evidence})",
                           c_line, f"{module.path}:{c_line}")
    return verdict


def where_of(location: str) -> str:
    """A ``path:line`` made relative like ``where`` does."""
    path, _, line = location.rpartition(":")
    return where(path, int(line)) if path and line.isdigit() else location


class StubHookError(AuditError):
    """Raised by ``strict=True`` when a defense has a stubbed or missing hook."""


class HookFinding(Record):
    """What the source of one hook of one defense class does."""

    defense: str
    cls: str
    hook: HookName
    status: HookStatus
    declared: bool
    form: str | None = None
    evidence: str
    location: str
    defined_in: str
    pattern: str | None = None
    releases_context: bool = False

    @property
    def problem(self) -> str | None:
        """Why this finding fails a strict audit on the source alone, or None (``verdict.problem``)."""
        from ragleak.audit.verdict import combine, problem

        return problem(self, combine(self))


class DefenseInventory(Record):
    """The four findings of one defense class."""

    defense: str
    cls: str
    location: str
    declared_hooks: list[HookName]
    findings: list[HookFinding]
    notes: list[str] = []  # what the static route could not read (a non-literal `hooks`)

    def finding(self, hook: HookName) -> HookFinding:
        return next(f for f in self.findings if f.hook == hook)

    @property
    def problems(self) -> list[HookFinding]:
        return [f for f in self.findings if f.problem]

    @property
    def active_hooks(self) -> list[HookName]:
        return [f.hook for f in self.findings if f.status in ACTIVE_STATUSES]


def _finding(defense: str, cls: str, hook: str, declared: bool, result: "_Result") -> HookFinding:
    return HookFinding(defense=defense, cls=cls, hook=hook, declared=declared, **result.__dict__)


@dataclass(frozen=True)
class _Result:
    status: str
    form: str | None
    evidence: str
    location: str
    defined_in: str
    pattern: str | None = None
    releases_context: bool = False


def _from_verdict(verdict: BodyVerdict, defined_in: str, prefix: str = "") -> _Result:
    return _Result(verdict.status, verdict.form, prefix + verdict.evidence, where_of(verdict.where), defined_in,
                   verdict.pattern, verdict.releases_context)


def _strict(inventories: list[DefenseInventory], strict: bool) -> list[DefenseInventory]:
    if strict:
        problems = [f"{f.cls}.{f.hook} at {f.location}: {f.problem}" for inv in inventories for f in inv.problems]
        if problems:
            raise StubHookError("stubbed or missing hooks: " + "; ".join(problems))
    return inventories


# --------------------------------------------------------------------------------- class route


def _base():
    from ragleak.defenses.base import Defense

    return Defense


def _code_of(cls: type):
    for value in vars(cls).values():
        func = getattr(value, "__func__", value)
        code = getattr(inspect.unwrap(func), "__code__", None) if callable(func) else None
        if code is not None:
            return code
    return None


@functools.lru_cache(maxsize=512)
def _class_source(cls: type) -> tuple[Module, ast.ClassDef]:
    """The parsed file that defines ``cls`` and its ``class`` node (cached per class object)."""
    try:
        path, line = inspect.getsourcefile(cls), inspect.getsourcelines(cls)[1]
    except (OSError, TypeError):
        code = _code_of(cls)  # a module loaded from a path without a sys.modules entry
        if code is None or not Path(code.co_filename).is_file():
            raise AuditError(f"the source of {cls.__qualname__} is not available; audit its .py file instead") from None
        path, line = code.co_filename, code.co_firstlineno
    module = load_module(path)
    candidates = [c for c in ast.walk(module.tree) if isinstance(c, ast.ClassDef) and c.name == cls.__name__]
    if not candidates:
        raise AuditError(f"class {cls.__qualname__} not found in {path}")
    # the class statement nearest above `line` (an exact match when inspect found the class itself)
    above = [c for c in candidates if min([c.lineno] + [d.lineno for d in c.decorator_list]) <= line]
    node = max(above, key=lambda c: c.lineno) if above else candidates[0]
    return module, node


def _class_location(cls: type) -> str:
    """``file:line`` of the class statement, or its dotted name when the source is not available."""
    try:
        module, node = _class_source(cls)
    except AuditError:
        return f"{cls.__module__}.{cls.__qualname__}"
    return where(module.path, node.lineno)


@functools.lru_cache(maxsize=512)
def _class_scope(cls: type) -> tuple[Scope, tuple[type, ...]]:
    """The class and its bases with readable source, in method-resolution order."""
    pairs, owners = [], []
    for k in cls.__mro__:
        if k is object:
            continue
        try:
            pairs.append(_class_source(k))
        except AuditError:
            continue
        owners.append(k)
    return Scope(pairs), tuple(owners)


def _analyse_in(scope: Scope, idx: int, hook: str, owner_name: str, inherited: bool) -> _Result:
    module, node = scope.mro[idx]
    func = method(node, hook)
    prefix = f"inherited from {owner_name}: " if inherited else ""
    if func is None:
        bound = class_attr(node, hook)
        target = module.functions.get(bound.id) if isinstance(bound, ast.Name) else None
        if target is None:
            return _Result("undetermined", None, prefix + _UNANALYSED, where(module.path, node.lineno), owner_name)
        func = target
    return _from_verdict(analyse(module, func, hook, scope, idx), owner_name, prefix)


_UNANALYSED = "bound by an assignment to something other than a module function: not analysed"


def _class_hook(cls: type, hook: str) -> _Result:
    """The finding of ``hook`` as ``cls`` resolves it."""
    base = _base()
    owner = next(k for k in cls.__mro__ if hook in vars(k))
    if owner is base:
        return _Result("not-overridden", None, "inherits the base identity hook", _class_location(cls), "Defense")
    scope, owners = _class_scope(cls)
    if owner not in owners:
        return _Result("undetermined", None, f"the source of {owner.__qualname__} is not available",
                       _class_location(cls), owner.__qualname__)
    return _analyse_in(scope, owners.index(owner), hook, owner.__qualname__, owner is not cls)


def inventory_class(cls: type, *, strict: bool = False) -> DefenseInventory:
    """The static inventory of an importable ``Defense`` subclass."""
    base = _base()
    if not (isinstance(cls, type) and issubclass(cls, base)):
        raise AuditError(f"{cls!r} is not a subclass of ragleak.defenses.Defense")
    declared = sorted(getattr(cls, "hooks", ()) or ())
    findings = []
    for hook in HOOK_NAMES:
        findings.append(_finding(cls.name, cls.__qualname__, hook, hook in declared, _class_hook(cls, hook)))
    inv = DefenseInventory(defense=cls.name, cls=cls.__qualname__, location=_class_location(cls),
                           declared_hooks=declared, findings=findings)
    return _strict([inv], strict)[0]


# ---------------------------------------------------------------------------------- file route


def _external(module: Module, name: str) -> type | None:
    """A base class named ``name`` imported from elsewhere, if it imports and is a Defense."""
    if name not in module.imports:
        return None
    mod, attr = module.imports[name]
    try:
        value = getattr(importlib.import_module(mod), attr)
    except Exception as exc:  # noqa: BLE001 - a user's unimportable base is logged, not fatal
        log.info("base %s of %s does not import (%s: %s)", name, module.path, type(exc).__name__, exc)
        return None
    return value if isinstance(value, type) and issubclass(value, _base()) else None


def _mro(module: Module, cls: ast.ClassDef) -> tuple[list[ast.ClassDef], list[str]]:
    """In-file classes in method-resolution order (depth-first), and the external base names."""
    order, external = [], []

    def visit(node: ast.ClassDef) -> None:
        if node in order:
            return
        order.append(node)
        for base in node.bases:
            name = base.id if isinstance(base, ast.Name) else getattr(base, "attr", None)
            if name in module.classes and module.classes[name] is not node:
                visit(module.classes[name])
            elif name and name not in external:
                external.append(name)

    visit(cls)
    return order, external


def _is_defense(module: Module, cls: ast.ClassDef) -> bool:
    """A subclass of ``Defense`` (by name or by an importable base), or a class declaring ``hooks``
    whose base cannot be imported here (a defense built on someone else's base)."""
    order, external = _mro(module, cls)
    if "Defense" in external or any(_external(module, n) is not None for n in external if n != "Defense"):
        return True
    return bool(cls.bases) and any(class_attr(c, "hooks") is not None for c in order)


def _file_scope(module: Module, order: list[ast.ClassDef], externals: list[type]) -> tuple[Scope, list[str]]:
    """In-file classes, then each importable external base's own resolution order."""
    pairs, names = [(module, node) for node in order], [node.name for node in order]
    seen: set[type] = set()
    for ext in externals:
        scope, owners = _class_scope(ext)
        for k, pair in zip(owners, scope.mro):
            if k not in seen:
                seen.add(k)
                pairs.append(pair)
                names.append(k.__qualname__)
    return Scope(pairs), names


def _file_hook(module: Module, order: list[ast.ClassDef], externals: list[type], hook: str) -> _Result:
    scope, names = _file_scope(module, order, externals)
    for i, (mod, node) in enumerate(scope.mro):
        if method(node, hook) is not None or class_attr(node, hook) is not None:
            if names[i] == "Defense" and mod.path.endswith(os.path.join("defenses", "base.py")):
                break
            return _analyse_in(scope, i, hook, names[i], i != 0)
    return _Result("not-overridden", None, "inherits the base identity hook", where(module.path, order[0].lineno),
                   "Defense")


def _hooks_value(module: Module, value: ast.expr) -> list[str] | None:
    """The strings of a ``hooks`` value: a literal, or a module constant bound once to one
    (``hooks = frozenset(HOOK_LIST)``); None when it is computed some other way."""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and len(value.args) == 1 \
            and value.func.id in {"frozenset", "set", "tuple", "list"} and isinstance(value.args[0], ast.Name):
        value = value.args[0]
    if isinstance(value, ast.Name) and value.id in module.constants:
        value = module.constants[value.id]
    return literal_strings(value)


def _inherited_literal(module: Module, order: list[ast.ClassDef], externals: list[type], attr: str):
    for node in order:
        value = class_attr(node, attr)
        if value is not None:
            if attr == "hooks":
                return _hooks_value(module, value)
            return value.value if isinstance(value, ast.Constant) else None
    for ext in externals:
        if attr == "hooks":
            return sorted(ext.hooks)
        return ext.name if ext is not _base() else None  # the base's "none" is no name for a subclass
    return [] if attr == "hooks" else None


def inventory_file(path: str | os.PathLike, *, strict: bool = False) -> list[DefenseInventory]:
    """The static inventory of every defense class in a ``.py`` file, read without importing it."""
    module = load_module(path)
    out = []
    for node in module.classes.values():
        if not _is_defense(module, node):
            continue
        order, external_names = _mro(module, node)
        externals = [e for e in (_external(module, n) for n in external_names) if e is not None]
        declared = _inherited_literal(module, order, externals, "hooks")
        notes = []
        if declared is None:  # one class's computed `hooks` must not stop the audit of the file
            notes.append(f"{where(module.path, node.lineno)}: `hooks` of {node.name} is computed, not a literal: "
                         "its declared hooks are unknown to the static route (audit with --probe, which reads "
                         "them at run time)")
            declared = []
        name = _inherited_literal(module, order, externals, "name") or node.name
        findings = []
        for hook in HOOK_NAMES:
            findings.append(_finding(name, node.name, hook, hook in declared,
                                     _file_hook(module, order, externals, hook)))
        out.append(DefenseInventory(defense=name, cls=node.name, location=where(module.path, node.lineno),
                                    declared_hooks=sorted(declared), findings=findings, notes=notes))
    if not out:
        raise AuditError(f"{path}: no Defense subclass found")
    return _strict(out, strict)


def inventory_of(target: type | str | os.PathLike, *, strict: bool = False) -> list[DefenseInventory]:
    """Audit a class, a ``.py`` file (every Defense subclass in it, or ``file.py:Class`` for one),
    or a registered defense name."""
    from ragleak.defenses.loader import split_file_reference

    if isinstance(target, type):
        return [inventory_class(target, strict=strict)]
    text = str(target)
    ref = split_file_reference(text) if not Path(text).is_file() else None
    if ref is not None:
        found = [inv for inv in inventory_file(ref[0], strict=strict) if inv.cls == ref[1]]
        if not found:
            raise AuditError(f"{ref[0]}: no Defense subclass named {ref[1]!r}")
        return found
    if text.endswith(".py") or Path(text).is_file():
        return inventory_file(text, strict=strict)
    from ragleak.defenses import DEFENSES

    cls = load_registered(DEFENSES, text)
    return [inventory_class(cls, strict=strict)]


def load_registered(registry, name: str) -> type:
    """Look ``name`` up in ``registry``; an import failure becomes an ``AuditError`` with advice."""
    try:
        return registry.get(name)
    except RagleakError as exc:
        raise AuditError(f"{exc}; or give the path of a .py file") from None
    except Exception as exc:  # noqa: BLE001 - any import failure of a plugin is the user's to see
        raise AuditError(f"defense {name!r} failed to import ({type(exc).__name__}: {exc}); "
                         f"audit its source file instead: ragleak audit path/to/file.py") from None
