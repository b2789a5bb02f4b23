"""Accuracy of the active-path audit on the red-team corpus, as JSON on stdout.

For every (class, hook) of ``tests/audit/fixtures/redteam.py`` (expected verdicts in
``redteam_manifest.json``): the static verdict (by importing the class, and by reading the file
without importing it), the dynamic trace of a model-free run through the real pipeline
(``tests/audit/redteam_probe.py``: scripted generator, fixed candidate lists) and the combined
verdict; the same for the held-out set ``redteam_holdout.py``. Also: whether every registered
defense passes ``ragleak audit --strict``.

    .venv/bin/python benchmarks/bench_audit.py [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _route(route: str, name: str = "redteam") -> dict:
    from redteam_probe import evaluate

    t0 = time.perf_counter()
    rows = evaluate(route, name)
    n = len(rows)
    stubs = [r for r in rows if r["expected"] == "inactive"]
    dynamic_only = [("inactive" if r["dynamic"]["releases"] or not r["dynamic"]["changed"] else "active")
                    for r in rows]
    return {
        "hooks": n,
        "static_accuracy": sum(r["static_ok"] for r in rows) / n,
        "static_by_status": dict(Counter(r["static"] for r in rows)),
        "stubs_reported_active_static": sum(r["static"] in {"active", "pattern-limited"} for r in stubs),
        "combined_accuracy": sum(r["combined_ok"] for r in rows) / n,
        "stubs_reported_active_combined": sum(r["combined"] in {"active", "pattern-limited"} for r in stubs),
        # the trace alone cannot tell pattern-limited from active: scored on the other rows
        "dynamic_only_accuracy_without_pattern_rows": (
            sum(d == r["expected"] for d, r in zip(dynamic_only, rows) if r["expected"] != "pattern-limited")
            / max(1, sum(r["expected"] != "pattern-limited" for r in rows))),
        "static_mistakes": [{k: r[k] for k in ("cls", "hook", "expected", "static", "evidence", "location")}
                            for r in rows if not r["static_ok"]],
        "combined_mistakes": [{k: r[k] for k in ("cls", "hook", "expected", "combined", "reason")}
                              for r in rows if not r["combined_ok"]],
        "seconds": round(time.perf_counter() - t0, 2),
    }


def _registered() -> dict:
    from typer.testing import CliRunner

    from ragleak.cli import app
    from ragleak.defenses import DEFENSES

    out = {}
    for name in DEFENSES.names():
        result = CliRunner().invoke(app, ["audit", name, "--strict", "--json"])
        verdicts = {}
        if result.exit_code == 0:
            (row,) = json.loads(result.stdout)["defenses"]
            verdicts = {h: c["verdict"] for h, c in row["hooks"].items() if c["declared"]}
        out[name] = {"strict_passes": result.exit_code == 0, "declared": verdicts,
                     "error": None if result.exit_code == 0 else str(result.exception)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "tests" / "audit"))
    logging.disable(logging.WARNING)  # the corpus's logging-only hooks log on every call
    from redteam_probe import load_corpus

    _, rows = load_corpus()
    report = {
        "corpus": {"hooks": len(rows), "by_expected": dict(Counter(r["expected"] for r in rows)),
                   "releases_context": sum(r["releases_context"] for r in rows)},
        "class_route": _route("class"),
        "file_route": _route("file"),
        # written after the analysis's first version; its first measurement drove four fixes (see its docstring)
        "holdout_class_route": _route("class", "redteam_holdout"),
        "holdout_file_route": _route("file", "redteam_holdout"),
        "registered_defenses": _registered(),
    }
    report["acceptance"] = {
        "static_accuracy_at_least_0.95": min(report[r]["static_accuracy"] for r in ("class_route", "file_route")) >= 0.95,
        "no_stub_reported_active": all(report[r]["stubs_reported_active_static"] == 0 for r in ("class_route", "file_route")),
        "combined_accuracy_1.0": min(report[r]["combined_accuracy"] for r in ("class_route", "file_route")) == 1.0,
        "registered_defenses_pass_strict": all(v["strict_passes"] for v in report["registered_defenses"].values()),
    }
    text = json.dumps(report, indent=2)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    sys.stdout.write(text + "\n")


if __name__ == "__main__":
    main()
