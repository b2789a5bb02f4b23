"""`ragleak report RUN_DIR` and `ragleak diff RUN_A RUN_B`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ragleak.cli.score import CorpusOpt, FailIfOpt, ViewOpt
from ragleak.cli.tables import column_title, metrics_by_defense, number, render_table_one, render_table_two, show

console = Console()


def report_command(
    run_dir: Path = typer.Argument(..., help="a grid run directory, or a folder of transcripts (`ragleak attack --out`)"),
    fail_if: Optional[list[str]] = FailIfOpt,
    show_leaks: bool = typer.Option(False, "--show-leaks", help="show leaked values unredacted in report.html"),
    corpus: Optional[str] = CorpusOpt,
    view: Optional[Path] = ViewOpt,
    as_json: bool = typer.Option(False, "--json", help="print the summary as JSON"),
) -> None:
    """Write report.html, summary.json, cells.jsonl, ragleak.sarif and junit.xml into RUN_DIR.

    A folder of transcripts (no plan.json) is scored first, as `ragleak score FOLDER --out FOLDER` would
    (with --corpus and --view), and reported like a grid run."""
    from ragleak.report.build import build_report
    from ragleak.report.gates import parse_gates

    gates = parse_gates(fail_if) if fail_if else None  # None: the gates kept in the run folder
    if not (Path(run_dir) / "plan.json").exists():
        _score_folder(run_dir, corpus, view)
    paths = build_report(run_dir, gates=gates, show_leaks=show_leaks)
    summary = json.loads(Path(paths["summary"]).read_text())
    failed_gates = [g for g in summary["gates"] if g["failed"]]
    if as_json:
        sys.stdout.write(json.dumps({"paths": paths, "summary": summary}, indent=2) + "\n")
        if failed_gates:
            raise typer.Exit(1)
        return
    print_summary(summary, paths)
    if failed_gates:
        raise typer.Exit(1)


def _score_folder(folder: Path, corpus: Optional[str], view: Optional[Path]) -> None:
    from ragleak.attacks.views import read_view
    from ragleak.grid.scored import scored, scoring_corpus, transcript_paths, write_run
    from ragleak.measure import run_attack
    from ragleak.stack import Stack

    paths = transcript_paths(folder)  # a folder with neither a plan nor transcripts is a user error here
    stack = Stack()
    passages, corpus_label, corpus_digest = scoring_corpus(corpus, stack.config)
    items = scored(paths, read_view(view) if view else None, corpus_label, corpus_digest)
    write_run(folder, items, [run_attack(item.transcript, None, stack.context(0), passages) for item in items])
    console.print(f"scored {len(paths)} transcripts into {folder}", highlight=False, soft_wrap=True)


def print_summary(summary: dict, paths: dict) -> None:
    """The terminal report: Tables I and II, leakage per defense, faults, leaked items, gates."""
    empty = summary.get("empty_states", {})
    if summary["table_one"]:
        show(console, render_table_one(summary["table_one"]))
    if summary["table_two"]:
        show(console, render_table_two(summary["table_two"]))
    else:
        console.print("Table II is empty: " + empty.get("table_two", "no deltas"), highlight=False, markup=False,
                      soft_wrap=True)
    show(console, leakage_table(summary["levels"]))
    for defense, items in (summary.get("leaks") or {}).items():
        show(console, leaks_table(defense, items))
    for row in summary.get("leak_headline") or []:
        console.print(f"{row['defense']}: {row['text']} ({row['metric']})", highlight=False, markup=False,
                      soft_wrap=True)
    for defense, rows in (summary.get("canary_list") or {}).items():
        show(console, canary_table(defense, rows))
    if summary.get("leak_state") == "not_measured":
        console.print("What leaked: " + empty.get("leaks", "nothing was measured"), highlight=False, markup=False,
                      soft_wrap=True)
    if summary.get("incomplete"):
        show(console, incomplete_table(summary["incomplete"], summary["plan"]))
    if summary["partial"]:
        show(console, fault_table(summary["partial"]))
    for row in summary.get("privacy_checks", []):
        if row["beaten"]:
            console.print(f"[bold red]claim beaten:[/bold red] {escape(row['defense'])}: eps({row['queries']}) = "
                          f"{row['claim_eps']:.4g} is below the lower bound of {escape(' and '.join(row['beaten_by']))}",
                          highlight=False)
    small = summary.get("sample_warnings") or []
    if small:
        console.print(f"{len(small)} readings rest on fewer units than their minimum sample (an MI AUC from fewer than "
                      "20 candidates, a mean over fewer than 10 queries ...): see the report's warnings",
                      highlight=False, markup=False, soft_wrap=True)
    status, ex, plan = summary["status_counts"], summary["excluded"], summary["plan"]
    console.print(f"{plan['planned']} cells planned, {summary['cells']} with a record ({status['ok']} ok, "
                  f"{status['partial']} partial, {status['failed']} failed, {status['error']} errors; "
                  f"{status['missing']} missing, {status['corrupt']} corrupt); aggregates leave out {ex['failed']} failed and {ex['error']} crashed "
                  f"cells; {summary['model_calls']} model calls, cache hit rate {summary['cache_hit_rate']:.0%}, "
                  f"{summary['dedup']['cells_with_identical_release']} cells released the same as another "
                  f"({summary['dedup']['level_readings']} readings collapsed before the bootstrap)", soft_wrap=True)
    for gate in summary.get("gates", []):
        console.print(("[red]FAIL[/red] " if gate["failed"] else "ok ") + escape(gate["message"]), highlight=False,
                      soft_wrap=True)
    console.print(f"report: {paths['report']}")


def leaks_table(defense: str, items: list[dict]) -> Table:
    """Every item a defense leaked, redacted unless the report was written with --show-leaks."""
    raw = any("value" in it for it in items)
    table = Table(title=escape(f"leaked by {defense}: {len(items)} item{'' if len(items) == 1 else 's'}"
                               + ("" if raw else " (redacted)")))
    for col in ("metric", "type", "value", "documents", "cells", "queries"):
        table.add_column(col, overflow="fold")
    for it in items:
        table.add_row(it["metric"], it["type"], escape(it.get("value") or it["redacted"]),
                      escape(", ".join(it["documents"]) or "-"), str(len(it["cells"])), str(it["queries"]))
    return table


CANARY_ROWS = 20  # above this many canaries the terminal lists the recovered ones only


def canary_table(defense: str, rows: list[dict]) -> Table:
    """Every canary planted in a defense's cells: recovered or not, and the query that released it."""
    found = sum(r["recovered"] for r in rows)
    # a long list (the canary preset plants 50 per seed) shows the recovered ones here; every
    # canary, recovered or not, is in summary.json (canary_list) and on the page
    shown = rows if len(rows) <= CANARY_ROWS else [r for r in rows if r["recovered"]]
    rest = "" if shown is rows else f"; the {len(rows) - found} not recovered are listed in summary.json (canary_list)"
    table = Table(title=escape(f"canaries under {defense}: {found} of {len(rows)} recovered{rest}"))
    for col in ("canary", "type", "recovered", "released by"):
        table.add_column(col, overflow="fold")
    for r in shown:
        first = r.get("first")
        via = f"query {first['query']} of {first['label']}: {first['query_text']}" if first else "-"
        table.add_row(escape(r.get("value") or r["redacted"]), r["type"], "yes" if r["recovered"] else "no",
                      escape(via))
    return table


def incomplete_table(cells: list[dict], plan: dict) -> Table:
    """The planned cells that gave no readings, each with its reason: every gate fails on them."""
    table = Table(title=escape(f"incomplete evidence: {len(cells)} of {plan['planned']} planned cells gave no "
                               "readings (every gate fails)"))
    for col in ("cell", "status", "reason"):
        table.add_column(col, overflow="fold")
    for c in cells:
        table.add_row(escape(c["label"]), c["status"], escape(c["reason"]))
    return table


def leakage_table(levels: list[dict]) -> Table:
    """Metrics x defenses, each reading 'mean [low, high]'."""
    by_key = {(r["metric"], r["defense"]): r for r in levels}

    def text(metric: str, defense: str) -> str | None:
        r = by_key.get((metric, defense))
        if r is None:
            return None
        of = "" if r.get("of") is None else f" {r['of']}"
        if r["low"] is None:
            return escape(f"{number(r['estimate']):.3g}{of}\n(1 cell)")
        star = "*" if r.get("interval_over", "cells") != "cells" else ""
        if r["low"] == r["high"]:  # a zero-width interval is no precision: every reading was equal
            return escape(f"{number(r['estimate']):.3g}{of}\n(no spread){star}")
        return escape(f"{number(r['estimate']):.3g}{of}\n[{number(r['low']):.3g}, {number(r['high']):.3g}]{star}")

    return metrics_by_defense("leakage per defense: mean [95% bootstrap interval over cells; * over one cell's queries]",
                              sorted({r["metric"] for r in levels}), sorted({r["defense"] for r in levels}), text)


def fault_table(cells: list[dict]) -> Table:
    """The failed and partial cells with their queries by outcome."""
    table = Table(title="failed cells (left out of aggregates) and partial cells (read over answered queries)")
    for col in ("cell", "status", "queries", "answered", "refused", "failed"):
        table.add_column(col)
    for c in cells:
        counts = c["counts"] or {}
        table.add_row(c["label"], c["status"], *[str(counts.get(k, "-")) for k in ("queries", "answered", "refused", "errors")])
    return table


def diff_command(
    run_a: Path = typer.Argument(...),
    run_b: Path = typer.Argument(...),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Show which per-defense metric levels moved between two runs (intervals that do not overlap)."""
    from ragleak.report.diff import diff_runs

    rows = diff_runs(run_a, run_b)
    if as_json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return
    table = Table(title=f"{run_a} -> {run_b} (failed cells left out: A / B)")
    for col in ("defense", "metric", "A", "B", "delta", "moved", "failed cells left out"):
        table.add_column(col)
    fmt = lambda v: "-" if v is None else f"{v[0]:.3g}" + ("" if v[1] is None else f" [{v[1]:.3g}, {v[2]:.3g}]")  # noqa: E731
    for r in rows:
        table.add_row(r["defense"], column_title(r["metric"]), fmt(r["a"]), fmt(r["b"]),
                      "-" if r["delta"] is None else f"{r['delta']:+.3g}", {True: "yes", False: "no", None: "-"}[r["moved"]],
                      f"{r['excluded_failed']['a']} / {r['excluded_failed']['b']}")
    show(console, table)
