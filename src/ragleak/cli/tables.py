"""Terminal renderings of the audit dashboard's records: Table I (hook status per defense) and
Table II (metric deltas vs the baseline, interpretable or not), built by ``ragleak.audit.dashboard``.

``show(console, table)`` is how every command prints a table: a rich table on a terminal, and a
plain, never-truncated text table otherwise (a CI log or a pipe), where rich would fold the table
into 80 columns and cut numbers.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

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
    from ragleak.audit.dashboard import dynamic_text
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
            text = label + ("*" if c["declared"] else "") + dynamic_text(c["dynamic"])
            cells.append(f"[{style}]{escape(text)}[/]")
        name = row["defense"] if row["defense"] == row["class"] else f"{row['defense']} ({row['class']})"
        status = row["status"] + (" [red]![/]" if row["problems"] else "")
        table.add_row(name, *cells, status)
    table.caption = ("combined verdict per hook (static dataflow + the run's per-channel effect); * declared in "
                     "`hooks`; N/M: changed a channel (the selected top-k, the prompt, the answer; against the "
                     "identity hook on the same input) in N of M calls; (own K): its own output changed in K calls; "
                     "~: own-output counts (records from before the per-channel effect); ! see problems")
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


def _plain(cell: Any) -> str:
    text = cell.plain if isinstance(cell, Text) else Text.from_markup(cell).plain if isinstance(cell, str) else str(cell)
    return " ".join(text.split("\n"))


def plain_table(table: Table) -> str:
    """``table`` as plain text: columns padded to their widest cell, nothing folded or cut, rich
    markup removed, a multi-line cell on one line."""
    headers = [_plain(c.header) for c in table.columns]
    columns = [[_plain(cell) for cell in c.cells] for c in table.columns]
    rows = [list(r) for r in zip(*columns)] if columns else []
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    out = []
    if table.title:
        out.append(_plain(table.title))
    if table.show_header:
        out += [line(headers), line(["-" * w for w in widths])]
    out += [line(r) for r in rows]
    if table.caption:
        out.append(_plain(table.caption))
    return "\n".join(out) + "\n"


def show(console: Console, table: Table) -> None:
    """Print ``table``: rich on a terminal, ``plain_table`` otherwise (CI logs, pipes, files)."""
    if console.is_terminal:
        console.print(table)
    else:
        console.file.write(plain_table(table))
        console.file.flush()


def reading_text(value: float | None, note: str | None = None) -> str:
    """A reading for a table: up to 6 significant digits (never cut), ``undefined (why)`` for None."""
    if value is None:
        return f"undefined ({note})" if note else "undefined"
    return f"{number(value):.6g}"


def of_text(details: dict[str, Any]) -> str:
    """What a count is out of: " of N" for a count with ``of`` in its details, " (k of N)" for a
    rate with ``recovered``/``total`` (canaries); empty otherwise."""
    if isinstance(details.get("recovered"), int) and isinstance(details.get("total"), int):
        return f" ({details['recovered']} of {details['total']})"
    return f" of {details['of']}" if isinstance(details.get("of"), int) else ""


def metric_results_table(title: str, results: dict[str, Any]) -> Table:
    """One transcript's readings (``{key: MetricResult}``): value, n and what it counts, interval,
    direction and note, a metric (or part) per row."""
    from ragleak.metrics import metric_info

    table = Table(title=escape(title))
    for col in ("metric", "value", "n", "95% interval", "unit", "note"):
        table.add_column(col, overflow="fold")
    for key in sorted(results):
        r = results[key]
        info = metric_info(key) if metric_title(key) != key else {"unit": "", "higher_is_leakier": True}
        unit = info["unit"] + ("; higher = more leakage" if info["higher_is_leakier"] else "; lower = more leakage")
        interval = ("-" if r.interval is None else "no spread" if r.interval[0] == r.interval[1]
                    else f"[{number(r.interval[0]):.4g}, {number(r.interval[1]):.4g}]")
        value = reading_text(r.value, r.note) + ("" if r.value is None else of_text(r.details))
        note = "; ".join(x for x in (None if r.value is None else r.note,
                                     f"{r.failed} failed queries left out" if r.failed else None) if x)
        table.add_row(column_title(key), escape(value), escape(f"{r.n} {r.n_of}"), escape(interval), escape(unit),
                      escape(note))
    return table
