"""The defense classes an audit target names, as Python built them.

A ``.py`` file is imported with its own folder on ``sys.path`` (a defense that imports a sibling
module or inherits from a base there works as it does for its author), under a module name of
its own; its classes are the ``Defense`` subclasses the module itself defines, after the whole
module ran: rebinding after the class body, decorators, metaclasses and conditional definitions
are what they are at run time, and each hook resolves through Python's own method resolution
order. ``file.py:Class`` names one class; a registered name its registered class.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import inspect
import sys
from pathlib import Path
from types import ModuleType
from typing import Iterator

from ragleak.audit.source import AuditError, where
from ragleak.defenses.base import Defense
from ragleak.records import HookName


@contextlib.contextmanager
def folder_on_path(path: Path) -> Iterator[None]:
    """``path``'s folder first on ``sys.path`` while the block runs (a defense may import its
    siblings lazily, inside a hook)."""
    folder = str(path.resolve().parent)
    added = folder not in sys.path
    if added:
        sys.path.insert(0, folder)
    try:
        yield
    finally:
        if added and folder in sys.path:
            sys.path.remove(folder)


def import_file(path: Path) -> ModuleType:
    """Import ``path`` as a module of its own name (digest of its path and bytes), its folder on
    ``sys.path``; an import failure is an ``AuditError`` with the user's exception."""
    path = Path(path)
    if not path.is_file():
        raise AuditError(f"no such file: {path}")
    data = path.read_bytes()
    name = "ragleak_audited_" + hashlib.sha256(str(path.resolve()).encode() + data).hexdigest()[:16]
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path.resolve())
    if spec is None or spec.loader is None:
        raise AuditError(f"{path} cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # inspect finds a class's source through its module
    with folder_on_path(path):
        try:
            spec.loader.exec_module(module)
        except Exception as exc:  # the user's code: any failure is theirs to see, in one line
            sys.modules.pop(name, None)
            raise AuditError(f"{path} failed to import: {type(exc).__name__}: {exc}") from exc
    return module


def classes_in(module: ModuleType) -> list[type[Defense]]:
    """The ``Defense`` subclasses ``module`` defines (not those it imports), in the order the module
    bound them (a module's namespace keeps it)."""
    return [v for v in vars(module).values()
            if isinstance(v, type) and issubclass(v, Defense) and v is not Defense and v.__module__ == module.__name__]


def defense_classes(target: str | Path) -> tuple[list[type[Defense]], Path | None]:
    """(the classes ``target`` names, the file they came from or None for a registered name)."""
    from ragleak.audit.inventory import load_registered
    from ragleak.defenses import DEFENSES
    from ragleak.defenses.loader import split_file_reference

    text = str(target)
    ref = split_file_reference(text) if not Path(text).is_file() else None
    if ref is not None:
        found = [c for c in classes_in(import_file(ref[0])) if c.__name__ == ref[1]]
        if not found:
            raise AuditError(f"{ref[0]}: no Defense subclass named {ref[1]!r}")
        return found, ref[0]
    if text.endswith(".py") or Path(text).is_file():
        classes = classes_in(import_file(Path(text)))
        if not classes:
            raise AuditError(f"{text}: no Defense subclass found")
        return classes, Path(text)
    return [load_registered(DEFENSES, text)], None


def overrides(cls: type, hook: HookName) -> bool:
    """Whether Python resolves ``cls.hook`` to something other than the base identity."""
    return getattr(cls, hook, None) is not getattr(Defense, hook)


def owner_of(cls: type, hook: HookName) -> type | None:
    """The class in ``cls``'s method resolution order whose namespace holds ``hook``."""
    return next((k for k in cls.__mro__ if hook in vars(k)), None)


def hook_location(cls: type, hook: HookName) -> str:
    """``file:line`` of the function ``cls.hook`` resolves to (decorators unwrapped), or its owner's name."""
    func = getattr(cls, hook, None)
    func = getattr(func, "__func__", func)
    try:
        code = inspect.unwrap(func).__code__
    except (AttributeError, ValueError):
        owner = owner_of(cls, hook)
        return owner.__qualname__ if owner is not None else cls.__qualname__
    return where(code.co_filename, code.co_firstlineno)
