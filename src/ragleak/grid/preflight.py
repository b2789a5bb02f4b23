"""Check everything a grid's cells need from outside before a run folder exists.

``GridConfig.expand`` resolves names, builds parameter models and digests corpora and view files;
what it leaves to the cell is read here once, so a typo costs no run folder, no index and no
model load: the ``$env:`` variables an HTTP target's URL and headers name, a callable target's
import path, and the input files plugin parameters name (``*_path``, ``manifest``, ``view``,
``file``: each must be a readable file, and the kinds ragleak reads are read as the cell would:
a ``classifier_path`` as an asymmetry classifier, a ``manifest`` as a canary manifest). Every
problem is collected and raised as one ``ConfigError`` (the CLI exits 2).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Iterable

from ragleak.errors import ConfigError, RagleakError
from ragleak.grid.spec import CellSpec


def _classifier(path: Path) -> None:
    from ragleak.attacks.asymmetry.classifier import AsymmetryClassifier

    AsymmetryClassifier.load(str(path))


def _manifest(path: Path) -> None:
    from ragleak.attacks.views import read_view

    read_view(path)


#: Parameter names whose file ragleak reads in a cell, and how (a check that raises on a bad file).
READERS: dict[str, Callable[[Path], None]] = {"classifier_path": _classifier, "manifest": _manifest,
                                              "view": _manifest}


def _is_input_file(key: str) -> bool:
    """A parameter naming a file the cell reads (``classifier_out`` and other outputs are not)."""
    return not key.endswith("_out") and (key.endswith("_path") or key in ("manifest", "view", "file"))


def _files(section: str, params: dict[str, Any]) -> Iterable[tuple[str, str, str]]:
    for key, value in params.items():
        if isinstance(value, (str, os.PathLike)) and _is_input_file(key):
            yield section, key, str(value)


def problems(cells: list[CellSpec], environ: dict[str, str] | None = None) -> list[str]:
    """What the cells need from outside and cannot have, one line each (empty: all there)."""
    from ragleak.rag.redact import env_names

    env = os.environ if environ is None else environ
    out: list[str] = []
    seen: set[tuple] = set()
    for cell in cells:
        target = cell.target
        if target is not None and target.kind == "http":
            for where, text in (("target.url", target.url or ""), *((f"target.headers.{k}", v)
                                                                   for k, v in target.headers.items())):
                for name in env_names(text):
                    if name not in env and ("env", name) not in seen:
                        seen.add(("env", name))
                        out.append(f"environment variable {name} is not set ({where} refers to it as $env:{name}); "
                                   f"export it before the run")
        if target is not None and target.kind == "callable" and ("callable", target.callable) not in seen:
            seen.add(("callable", target.callable))
            from ragleak.pipeline.target import load_callable

            try:
                load_callable(target.callable)  # type: ignore[arg-type]
            except RagleakError as exc:
                out.append(str(exc))
        files = [*_files(f"attack_params.{cell.attack}", cell.attack_params),
                 *_files(f"defense_params.{cell.defense}", cell.defense_params),
                 *_files(f"corpus_params.{cell.corpus}", cell.corpus_params)]
        if cell.view is not None:
            files.append((f"views.{cell.attack}", "view", cell.view))
        for section, key, value in files:
            if ("file", section, key, value) in seen:
                continue
            seen.add(("file", section, key, value))
            problem = _check_file(Path(value), key)
            if problem:
                out.append(f"{section}.{key}: {problem}")
    return out


def _check_file(path: Path, key: str) -> str | None:
    if not path.exists():
        return f"{path} does not exist"
    if not os.access(path, os.R_OK):
        return f"{path} is not readable by this user"
    reader = READERS.get(key)
    if reader is None:
        return None
    try:
        reader(path)
    except RagleakError as exc:
        return str(exc)
    return None


def preflight(cells: list[CellSpec], environ: dict[str, str] | None = None) -> None:
    """Raise one ``ConfigError`` naming every missing outside input of ``cells``."""
    found = problems(cells, environ)
    if found:
        raise ConfigError(f"the grid cannot run: {len(found)} of the inputs its cells need "
                          f"{'is' if len(found) == 1 else 'are'} missing or unusable (nothing was written): "
                          + "; ".join(found))
