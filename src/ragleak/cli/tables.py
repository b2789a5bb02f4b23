"""Terminal renderings of the audit dashboard's records: Table I (hook status per defense) and
Table II (metric deltas vs the baseline, interpretable or not), built by ``ragleak.audit.dashboard``."""

from __future__ import annotations

from typing import Any, Sequence

from rich.table import Table

from ragleak.metrics import metric_title
from ragleak.records import HOOK_NAMES


def column_title(metric_key: str) -> str:
    """A metric's column title in terminal tables: the registry's title of the metric (and part)."""
    return metric_title(metric_key)


_SHORT = {"active": ("active", "green"), "pattern-limited": ("pattern", "yellow"),
          "pass-through": ("pass-thru", "red"), "not-overridden": ("-", "dim")}
_HOOK_TITLES = {"score_retrieval": "retrieval", "rewrite_context": "context", "generate": "generate",
                "postprocess": "postprocess"}


def render_table_one(rows: Sequence[dict[str, Any]]) -> Table:
    """Table I as a rich table; ``problems`` of each row are left to the caller to list."""
    table = Table(title="Table I: hook status per defense")
    table.add_column("defense")
    for hook in HOOK_NAMES:
        table.add_column(_HOOK_TITLES[hook])
    table.add_column("status")
    for row in rows:
        cells = []
        for hook in HOOK_NAMES:
            c = row["hooks"][hook]
            label, style = _SHORT[c["static"]]
            text = label + ("*" if c["declared"] else "")
            if c["dynamic"] is not None:
                text += f" {c['dynamic']['changed']}/{c['dynamic']['calls']}"
            cells.append(f"[{style}]{text}[/]")
        name = row["defense"] if row["defense"] == row["class"] else f"{row['defense']} ({row['class']})"
        status = row["status"] + (" [red]![/]" if row["problems"] else "")
        table.add_row(name, *cells, status)
    table.caption = "* declared in `hooks`; N/M: changed N of M calls in the run; ! see problems"
    return table


def render_table_two(cells: Sequence[dict[str, Any]]) -> Table:
    metrics = sorted({c["metric"] for c in cells})
    defenses = list(dict.fromkeys(c["defense"] for c in cells))
    table = Table(title="Table II: metric delta vs baseline [95% interval]")
    table.add_column("defense")
    for m in metrics:
        table.add_column(column_title(m))
    for d in defenses:
        row = []
        for m in metrics:
            cell = next((c for c in cells if c["defense"] == d and c["metric"] == m), None)
            if cell is None:
                row.append("-")
                continue
            text = f"{cell['delta']:+.3g}"
            if cell["low"] is not None and cell["high"] is not None:
                text += f" [{cell['low']:.3g}, {cell['high']:.3g}]"
            row.append(text if cell["interpretable"] else f"[dim]({text}) n.i.[/]")
        table.add_row(d, *row)
    table.caption = "n.i. = not interpretable: no active hook of the defense reaches the metric's channel"
    return table
