"""`ragleak audit DEFENSE_NAME_OR_FILE.py [--run DIR] [--readings FILE] [--json] [--strict]`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer


def audit_command(
    target: str = typer.Argument(..., help="a registered defense name, or a .py file with Defense subclasses"),
    run: Optional[Path] = typer.Option(None, "--run", help="a run directory of trace JSON files: adds the dynamic N of M"),
    readings: Optional[Path] = typer.Option(None, "--readings", help="JSON list of metric readings "
                                            "({defense, metric, delta, low, high}) for Table II"),
    as_json: bool = typer.Option(False, "--json", help="print machine-readable JSON"),
    strict: bool = typer.Option(False, "--strict", help="exit 2 when a declared hook is inactive, undetermined or "
                                "missing, an override is inactive, or a hook releases the retrieved context"),
) -> None:
    """Per hook of a defense: the combined verdict (active, pattern-limited, inactive, undetermined) from the
    static dataflow of its source and, with --run, the trace of how often it changed its input's content."""
    from pydantic import ValidationError
    from rich.console import Console

    from ragleak.audit.dashboard import MetricReading, table_one, table_two
    from ragleak.audit.inventory import AuditError, StubHookError, inventory_of
    from ragleak.audit.trace import hook_activity, load_traces
    from ragleak.cli.tables import render_table_one, render_table_two, show

    inventories = inventory_of(target)
    activity = hook_activity(load_traces(run)) if run is not None else None
    rows = table_one(inventories, activity)
    data: dict = {"defenses": rows}
    if readings is not None:
        try:
            raw = json.loads(readings.read_text(encoding="utf-8"))
            parsed = [MetricReading.model_validate(r) for r in raw]
        except (OSError, json.JSONDecodeError, ValidationError, TypeError) as exc:
            raise AuditError(f"--readings {readings}: {exc}") from None
        data["table_two"] = table_two(parsed, inventories, activity)
    if as_json:
        sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    else:
        console = Console()
        show(console, render_table_one(rows))
        for row in rows:
            if row["releases_context"]:
                console.print(f"[red]{row['class']} releases the retrieved context verbatim[/red]",
                              highlight=False, soft_wrap=True)
            for hook, cell in row["hooks"].items():
                if cell["static"] != "not-overridden" or cell["declared"]:
                    verdict = "releases context" if cell["releases_context"] else cell["verdict"]
                    dyn = cell["dynamic"]
                    did = "fired in" if cell["verdict"] == "pattern-limited" else "changed the content of"
                    trace = "" if dyn is None else f"; trace: {did} {dyn['changed']} of {dyn['calls']} calls" + \
                        (f", re-ordered only {dyn['reordered']}" if dyn["reordered"] else "") + \
                        (f", released context {dyn['releases']}" if dyn["releases"] else "")
                    pattern = f"; pattern: {cell['pattern']}" if cell["pattern"] else ""
                    console.print(f"{row['class']}.{hook}: {verdict} (static {cell['static']} at {cell['location']}: "
                                  f"{cell['evidence']}{pattern}{trace})", highlight=False, soft_wrap=True, markup=False)
            for problem in row["problems"]:
                console.print(f"[red]problem:[/red] {row['class']}: {problem}", highlight=False, soft_wrap=True)
        if "table_two" in data:
            show(console, render_table_two(data["table_two"]))
    if strict:
        problems = [f"{r['defense']}: {p}" for r in rows for p in r["problems"]]
        if problems:
            raise StubHookError("strict audit failed: " + "; ".join(problems))
