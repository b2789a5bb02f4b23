"""`ragleak report RUN_DIR`: write summary.json, cells.jsonl, report.html, ragleak.sarif, junit.xml."""

from __future__ import annotations

import json
from pathlib import Path

from ragleak.grid.store import RunStore
from ragleak.files import atomic_write_text
from ragleak.report import ci, html, plots
from ragleak.report.summary import load_run, summarize


def build_report(run_dir: Path) -> dict[str, str]:
    run_dir = Path(run_dir)
    summary = summarize(run_dir)
    records = load_run(run_dir)
    figures: dict[str, str | None] = {
        f"bars:{m}": plots.leakage_bars(summary["levels"], m)
        for m in sorted({r["metric"] for r in summary["levels"]})
    }
    figures["roc"] = plots.roc_curves(run_dir, records)
    figures["eps"] = plots.epsilon_curves(summary["guarantees"])
    figures["utility"] = plots.utility_plot(summary["utility_curves"])
    paths = {
        "summary": run_dir / "summary.json",
        "report": run_dir / "report.html",
        "sarif": run_dir / "ragleak.sarif",
        "junit": run_dir / "junit.xml",
    }
    atomic_write_text(paths["summary"], json.dumps(summary, indent=2, default=str))
    html.write(summary, figures, paths["report"])
    atomic_write_text(paths["sarif"], ci.sarif(summary))
    atomic_write_text(paths["junit"], ci.junit(summary))
    paths["cells"] = RunStore(run_dir).write_cells_jsonl()
    return {k: str(v) for k, v in paths.items()}
