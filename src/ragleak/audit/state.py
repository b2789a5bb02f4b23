"""What a hook can remember between calls, as digests, and whether its own code reads the clock.

``state_digests`` hashes, per name, everything a defense's code can keep across calls: the
instance's attributes, the attributes of the classes in its method resolution order (not the base
``Defense``), and the globals of the modules those classes live in. Each value is walked to a
bounded depth and node count (containers, ``__dict__``/``__slots__`` objects, dataclasses,
pydantic records, numpy arrays by their bytes), so two digests of the same name differ exactly
where that state changed. Code, classes, modules, loggers and the pipeline's own machinery the
defense is handed (the run's stack, generators, indexes) count by identity only: a generator's
call log changes on every query and is not the defense's state.

``clock_reads`` notes calls of the wall clock (``time.time``, ``datetime.now``...) made from code
outside the standard library, installed packages and ragleak's own modules (defenses excepted):
a gate on the time of day reads it there.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import hashlib
import logging
import os
import sys
import sysconfig
import types
from typing import Any, Iterator

import numpy as np

MAX_DEPTH = 8
MAX_NODES = 50_000  # per snapshot: a module holding a large table is summarised, not walked whole
MAX_ARRAY_BYTES = 1 << 24

_OPAQUE = (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType, types.MethodType,
           types.BuiltinMethodType, property, classmethod, staticmethod, logging.Logger, logging.Handler)


def _is_infra(obj: Any) -> bool:
    """The pipeline's machinery a defense may hold (stack, generator, index, pipeline): not its state."""
    name = type(obj).__name__
    if name in {"Stack", "ScriptedStack", "RAGPipeline"}:
        return True
    generator = callable(getattr(obj, "generate", None)) and callable(getattr(obj, "render", None))
    index = callable(getattr(obj, "search", None)) and hasattr(obj, "passages")
    return generator or index


class _Walker:
    def __init__(self, budget: int) -> None:
        self.budget = budget

    def feed(self, obj: Any, h: Any, depth: int = 0, seen: frozenset[int] = frozenset()) -> None:
        self.budget -= 1
        if self.budget < 0 or depth > MAX_DEPTH:
            h.update(b"<bound>")
            return
        if obj is None or isinstance(obj, (bool, int, float, complex)):
            h.update(repr(obj).encode())
            return
        if isinstance(obj, str):
            h.update(b"s" + obj.encode("utf-8", "surrogatepass"))
            return
        if isinstance(obj, (bytes, bytearray)):
            h.update(b"b" + bytes(obj))
            return
        if isinstance(obj, _OPAQUE) or callable(obj) and not hasattr(obj, "__dict__") or _is_infra(obj):
            h.update(f"<{type(obj).__qualname__} {getattr(obj, '__qualname__', '')} {id(obj)}>".encode())
            return
        if id(obj) in seen:
            h.update(b"<cycle>")
            return
        seen = seen | {id(obj)}
        h.update(type(obj).__qualname__.encode())
        if isinstance(obj, np.ndarray):
            h.update(repr((obj.shape, str(obj.dtype))).encode())
            if obj.dtype != object and obj.nbytes <= MAX_ARRAY_BYTES:
                h.update(np.ascontiguousarray(obj).tobytes())
                return
            for item in obj.flat:
                self.feed(item, h, depth + 1, seen)
            return
        if isinstance(obj, dict):
            for k, v in list(obj.items()):
                self.feed(k, h, depth + 1, seen)
                self.feed(v, h, depth + 1, seen)
            return
        if isinstance(obj, (set, frozenset)):
            # hash order is stable for one object, not across equal ones: sort the items' digests
            parts = []
            for item in list(obj):
                sub = hashlib.blake2b(digest_size=16)
                self.feed(item, sub, depth + 1, seen)
                parts.append(sub.digest())
            for part in sorted(parts):
                h.update(part)
            return
        if isinstance(obj, (list, tuple)) or type(obj).__module__ == "collections":
            try:
                items = list(obj) if not isinstance(obj, dict) else list(obj.items())
            except Exception:  # noqa: BLE001 - an exotic container: its type is all we record
                return
            for item in items:
                self.feed(item, h, depth + 1, seen)
            return
        try:
            fields = _fields(obj)
        except Exception:  # noqa: BLE001 - an attribute that raises when read: the type is all we record
            h.update(b"<unreadable>")
            return
        if fields is None:
            # a C object without attributes (a lock, a compiled regex, a numpy Generator): its repr
            h.update(repr(obj).encode(errors="replace")[:512] if type(obj).__repr__ is not object.__repr__ else b"")
            return
        for k, v in fields:
            h.update(k.encode())
            self.feed(v, h, depth + 1, seen)


def _fields(obj: Any) -> list[tuple[str, Any]] | None:
    out: dict[str, Any] = {}
    if hasattr(obj, "__dict__"):
        try:
            out.update(vars(obj))
        except TypeError:
            pass
    for klass in type(obj).__mro__:
        for slot in getattr(klass, "__slots__", ()) or ():
            if isinstance(slot, str) and slot not in ("__dict__", "__weakref__") and hasattr(obj, slot):
                out[slot] = getattr(obj, slot)
    if dataclasses.is_dataclass(obj) and not out:
        out = {f.name: getattr(obj, f.name, None) for f in dataclasses.fields(obj)}
    return list(out.items()) if out or hasattr(obj, "__dict__") else None


def _digest(value: Any, walker: _Walker) -> str:
    h = hashlib.blake2b(digest_size=16)
    walker.feed(value, h)
    return h.hexdigest()


def _keepable(name: str, value: Any) -> bool:
    return not name.startswith("__") and not isinstance(value, _OPAQUE) and not _is_infra(value)


def state_digests(defense: Any, base: type) -> dict[str, str]:
    """``{"instance.NAME" | "class C.NAME" | "module M.NAME": digest}`` of the state ``defense``'s
    code can keep between calls (``base``: the framework's base class, left out)."""
    walker = _Walker(MAX_NODES)
    out: dict[str, str] = {}
    try:
        own = _fields(defense) or []
    except Exception:  # noqa: BLE001 - as in the walk: unreadable attributes are left out
        own = []
    for name, value in own:
        if _keepable(name, value):
            out[f"instance.{name}"] = _digest(value, walker)
    classes = [k for k in type(defense).__mro__ if k not in (base, object) and k.__module__ != "builtins"]
    for klass in classes:
        for name, value in list(vars(klass).items()):
            if _keepable(name, value) and not callable(value) and not hasattr(value, "__get__"):
                out[f"class {klass.__qualname__}.{name}"] = _digest(value, walker)
    skip = {base.__module__, "builtins"}
    for modname in dict.fromkeys(k.__module__ for k in classes):
        module = sys.modules.get(modname)
        if module is None or modname in skip:
            continue
        for name, value in list(vars(module).items()):
            if _keepable(name, value) and not callable(value):
                out[f"module {modname}.{name}"] = _digest(value, walker)
    return out


def changed(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """The names whose state differs (added, removed or changed)."""
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


# ------------------------------------------------------------------------------- the clock

_WALL_CLOCK_TIME = frozenset({"time", "time_ns", "localtime", "gmtime", "ctime"})
_WALL_CLOCK_DATE = frozenset({"now", "utcnow", "today"})


def _library_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    ragleak_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return tuple(sorted(r for r in roots if r)) + (ragleak_dir,)


_ROOTS = _library_roots()
_DEFENSES_DIR = os.path.join(_ROOTS[-1], "defenses")


def _clock_name(fn: Any) -> str | None:
    owner, name = getattr(fn, "__self__", None), getattr(fn, "__name__", "")
    if isinstance(owner, types.ModuleType) and owner.__name__ == "time" and name in _WALL_CLOCK_TIME:
        return f"time.{name}"
    if isinstance(owner, type) and issubclass(owner, _dt.date) and name in _WALL_CLOCK_DATE:
        return f"{owner.__name__}.{name}"
    return None


def _own_code(filename: str) -> bool:
    path = os.path.abspath(filename)
    if path.startswith(_DEFENSES_DIR):
        return True
    return not path.startswith(_ROOTS) and not filename.startswith("<frozen")


@contextlib.contextmanager
def clock_reads(into: set[str]) -> Iterator[None]:
    """Adds ``"time.time at file:line"`` to ``into`` for each wall-clock read made by the defense's
    own code while the block runs (a profile hook sees C calls; the previous one is restored)."""
    from ragleak.audit.source import where

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "c_call":
            name = _clock_name(arg)
            if name is not None and _own_code(frame.f_code.co_filename):
                into.add(f"{name} at {where(frame.f_code.co_filename, frame.f_lineno)}")

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield
    finally:
        sys.setprofile(previous)
