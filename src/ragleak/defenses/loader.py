"""Defense names as the user writes them: a registered name (``pad-regex``; packages register
theirs through the ``ragleak.defenses`` entry-point group) or ``path/to/file.py:Class``, a
``Defense`` subclass in a file of the user's, imported from that file.

A file defense's identity in a grid is its path and class plus a digest of the file's bytes
(``defense_source_digest``), so editing the file changes the cells that run it.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from ragleak.defenses.base import Defense
from ragleak.errors import ConfigError
from ragleak.files import sha256_file

_LOADED: dict[tuple[str, float], object] = {}


def split_file_reference(name: str) -> tuple[Path, str] | None:
    """``(path, class name)`` for ``path/to/file.py:Class``; None for a registered name."""
    path, sep, cls = name.rpartition(":")
    if not sep or not path.endswith(".py"):
        return None
    if not cls.isidentifier():
        raise ConfigError(f"defense {name!r}: expected path/to/file.py:ClassName")
    return Path(path), cls


def _module(path: Path):
    if not path.is_file():
        raise ConfigError(f"defense file {path} does not exist")
    resolved = path.resolve()
    key = (str(resolved), resolved.stat().st_mtime)
    if key not in _LOADED:
        # a name of its own per file, registered in sys.modules so that its classes pickle
        # (a Ray or process-pool worker imports the same file by the same name)
        module_name = f"ragleak_user_defense_{sha256_file(resolved)[:16]}"
        spec = importlib.util.spec_from_file_location(module_name, resolved)
        if spec is None or spec.loader is None:
            raise ConfigError(f"defense file {path} cannot be imported")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:  # the user's code: any failure is theirs to see, in one line
            sys.modules.pop(module_name, None)
            raise ConfigError(f"defense file {path} failed to import: {type(exc).__name__}: {exc}") from exc
        _LOADED[key] = module
    return _LOADED[key]


def defense_class(name: str) -> type[Defense]:
    """The class a defense name refers to: registered, or ``path/to/file.py:Class``."""
    from ragleak.defenses import DEFENSES

    ref = split_file_reference(name)
    if ref is None:
        return DEFENSES.get(name)
    path, cls_name = ref
    module = _module(path)
    cls = getattr(module, cls_name, None)
    if cls is None:
        found = sorted(n for n, v in vars(module).items()
                       if isinstance(v, type) and issubclass(v, Defense) and v.__module__ == module.__name__)
        raise ConfigError(f"defense file {path} has no class {cls_name!r}; "
                          f"Defense subclasses there: {', '.join(found) or 'none'}")
    if not (isinstance(cls, type) and issubclass(cls, Defense)):
        raise ConfigError(f"{name}: {cls_name} is not a subclass of ragleak.defenses.Defense")
    return cls


def defense_source_digest(name: str) -> str | None:
    """SHA-256 of a file defense's source (None for a registered name)."""
    ref = split_file_reference(name)
    return None if ref is None else sha256_file(ref[0])


def make_defense(name: str, **params) -> Defense:
    """An instance of the named defense (registered or ``file.py:Class``) with ``params``."""
    return defense_class(name)(**params)
