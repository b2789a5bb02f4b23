"""Terminal renderings of the audit dashboard's records: Table I (hook status per defense) and
Table II (metric deltas vs the baseline, interpretable or not), built by ``ragleak.audit.dashboard``."""

from __future__ import annotations

from typing import Any, Callable, Sequence

from rich.markup import escape
from rich.table import Table

from ragleak.metrics import metric_title
from ragleak.records import HOOK_NAMES


def column_title(metric_key: str) -> str:
    """A metric's title in terminal tables: the registry's title of the metric (and part), escaped
    so that a part such as ``[heuristic]`` is shown, not read as rich markup."""
    return escape(metric_title(metric_key))


def number(x: float) -> float:
    """``x`` with floating-point dust (a mean of deltas that cancel, e.g. -2.8e-17) shown as 0."""
    return 0.0 if abs(x) < 1e-12 else x


_SHORT = {"active": ("active", "green"), "pattern-limited": ("pattern", "yellow"),
          "inactive": ("inactive", "red"), "undetermined": ("undecided", "magenta"), "not-overridden": ("-", "dim"),
          "releases-context": ("releases ctx", "red")}
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
            label, style = _SHORT["releases-context" if c.get("releases_context") else c.get("verdict", c["static"])]
            text = label + ("*" if c["declared"] else "")
            if c["dynamic"] is not None:
                text += f" {c['dynamic']['changed']}/{c['dynamic']['calls']}"
            cells.append(f"[{style}]{text}[/]")
        name = row["defense"] if row["defense"] == row["class"] else f"{row['defense']} ({row['class']})"
        status = row["status"] + (" [red]![/]" if row["problems"] else "")
        table.add_row(name, *cells, status)
    table.caption = ("combined verdict per hook (static dataflow + the run's trace); * declared in `hooks`; "
                     "N/M: changed the content of N of M calls in the run; ! see problems")
    return table


def metrics_by_defense(title: str, metrics: Sequence[str], defenses: Sequence[str],
                       text: Callable[[str, str], str | None]) -> Table:
    """A metric per row, a defense per column (13 metrics x 6 defenses fit 80 columns this way,
    not the other way round); ``text(metric, defense)`` is a cell's text, None for no reading."""
    table = Table(title=title)
    table.add_column("metric", overflow="fold")
    for d in defenses:
        table.add_column(escape(d), overflow="fold")
    for m in metrics:
        table.add_row(column_title(m), *[text(m, d) or "-" for d in defenses])
    return table


def render_table_two(cells: Sequence[dict[str, Any]]) -> Table:
    by_key = {(c["metric"], c["defense"]): c for c in cells}

    def text(metric: str, defense: str) -> str | None:
        cell = by_key.get((metric, defense))
        if cell is None:
            return None
        out = f"{number(cell['delta']):+.3g}"
        if cell["low"] is not None and cell["high"] is not None:
            out += f"\n[{number(cell['low']):.3g}, {number(cell['high']):.3g}]"
        return escape(out) if cell["interpretable"] else f"[dim]({escape(out)}) n.i.[/]"

    table = metrics_by_defense("Table II: metric delta vs baseline [95% interval]", sorted({c["metric"] for c in cells}),
                               list(dict.fromkeys(c["defense"] for c in cells)), text)
    table.caption = "n.i. = not interpretable: no active hook of the defense reaches the metric's channel"
    return table
