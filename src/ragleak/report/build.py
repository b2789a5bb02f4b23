"""`ragleak report RUN_DIR`: write summary.json, cells.jsonl, report.html, ragleak.sarif, junit.xml.

The files are published as a whole: they are written into a hidden staging folder inside RUN_DIR
(``.report-*``), and one atomic symlink swap makes ``RUN_DIR/report`` point at it. The files at
the top of RUN_DIR are stable symlinks into ``report/``, so a reader sees either the previous
report or the new one, never a mix; a report killed half-way leaves only a hidden staging folder,
which the next report removes.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Sequence

from ragleak.errors import RagleakError
from ragleak.report import ci, html, plots
from ragleak.report.evidence import enrich, redact_tree, secrets_of
from ragleak.report.gates import Gate, check, gate_rows, load_gates, save_gates
from ragleak.report.summary import load_run, summarize

log = logging.getLogger(__name__)

REPORT_LINK = "report"
STAGE_PREFIX = ".report-"
FILES = {"summary": "summary.json", "report": "report.html", "sarif": "ragleak.sarif", "junit": "junit.xml",
         "cells": "cells.jsonl"}


def build_report(run_dir: Path, gates: Sequence[Gate] | None = None, show_leaks: bool = False) -> dict[str, str]:
    """Write the report files of ``run_dir``; ``gates`` (``--fail-if``) are kept in the run folder
    (``gates.json``) and checked over its cells against its plan; None: the gates kept there by an
    earlier ``grid --fail-if`` or ``report --fail-if``. They are written into the summary, SARIF and
    JUnit. ``show_leaks`` puts raw leaked values and answer snippets in the report files; without it
    every file holds them masked."""
    run_dir = Path(run_dir)
    if gates is None:
        gates = load_gates(run_dir)
    else:
        save_gates(run_dir, gates)
    summary = summarize(run_dir)
    summary["gates"] = gate_rows(check(gates, summary["cells_table"], summary["incomplete"],
                                       summary["plan"]["planned"]))
    records = load_run(run_dir)
    enrich(summary, records, run_dir, show_leaks=show_leaks)
    secrets = set() if show_leaks else secrets_of(records, run_dir)
    figures = plots.figures(summary, run_dir, records)
    stage = Path(tempfile.mkdtemp(dir=run_dir, prefix=STAGE_PREFIX))
    try:
        (stage / FILES["summary"]).write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
        html.write(summary, figures, stage / FILES["report"], show_leaks=show_leaks)
        (stage / FILES["sarif"]).write_text(ci.sarif(summary), encoding="utf-8")
        (stage / FILES["junit"]).write_text(ci.junit(summary), encoding="utf-8")
        (stage / FILES["cells"]).write_text("".join(json.dumps(redact_tree(r.model_dump(mode="json"), secrets),
                                                               ensure_ascii=False) + "\n" for r in records),
                                            encoding="utf-8")
        _fsync_folder(stage)
        _publish(run_dir, stage)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return {key: str(run_dir / name) for key, name in FILES.items()}


def _fsync_folder(folder: Path) -> None:
    for path in folder.iterdir():
        with open(path, "rb") as f:
            os.fsync(f.fileno())


def _swap_link(link: Path, target: str) -> None:
    """Point the symlink ``link`` at ``target`` in one atomic rename."""
    tmp = link.with_name(f".{link.name}.{os.getpid()}.link")
    tmp.unlink(missing_ok=True)
    os.symlink(target, tmp)
    os.replace(tmp, link)


def _publish(run_dir: Path, stage: Path) -> None:
    link = run_dir / REPORT_LINK
    if link.exists() and not link.is_symlink():
        raise RagleakError(f"{link} is not a ragleak report link; move it away and rerun `ragleak report`")
    _swap_link(link, stage.name)  # the switch: from here on readers see the new report
    for name in FILES.values():
        top = run_dir / name
        if not (top.is_symlink() and os.readlink(top) == f"{REPORT_LINK}/{name}"):
            _swap_link(top, f"{REPORT_LINK}/{name}")
    # earlier reports, and staging folders of reports killed half-way
    for old in run_dir.glob(f"{STAGE_PREFIX}*"):
        if old.name != stage.name and old.is_dir():
            shutil.rmtree(old, ignore_errors=True)
