"""`ragleak grid`: plan (--dry-run) or run a grid, with a progress line.

Exit codes (docs/grid.md): 0 every planned cell measured (ok or partial) and every gate passed;
1 a ``--fail-if`` gate failed (tripped, unchecked, or the evidence is incomplete: any cell
crashed, failed or has no record fails every gate); 2 the grid could not run (a bad config, a
missing ``$env:`` variable or input file: nothing was written; or another user error); 3 no gate
was given and some planned cell crashed, failed or has no record.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from ragleak.config import validation_message
from ragleak.errors import ConfigError

console = Console(stderr=True)

EXIT_OK, EXIT_GATES, EXIT_USER_ERROR, EXIT_CELLS = 0, 1, 2, 3


def grid_command(
    preset: Optional[str] = typer.Option(None, "--preset", help="demo | paper | canary | statistics | statistics-dp"),
    config: Optional[Path] = typer.Option(None, "--config", help="grid YAML (attacks, defenses, corpora, modes, epsilons, ...)"),
    out: Optional[Path] = typer.Option(None, "--out", help="run directory (resumes if it exists)"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print the plan and the distinct generations it needs"),
    executor: str = typer.Option("local", "--executor", help="local | ray"),
    workers: Optional[int] = typer.Option(None, "--workers", help="parallel workers (default: cores)"),
    address: Optional[str] = typer.Option(None, "--address", help="Ray cluster address (executor ray)"),
    retry_errors: bool = typer.Option(False, "--retry-errors", help="rerun cells whose record is an error or failed"),
    as_json: bool = typer.Option(False, "--json", help="print machine-readable JSON"),
    rebuild_cache: bool = typer.Option(False, "--rebuild-cache",
                                       help="move the run's generation cache aside and start a fresh one"),
    fail_if: Optional[list[str]] = typer.Option(None, "--fail-if", help='a CI gate "METRIC OP NUMBER", e.g. '
                                                '"pii_leaks>0" (repeatable): after the run, write the report (SARIF, '
                                                "JUnit) and exit 1 when a measured cell trips it or none has the reading"),
    audit: Optional[str] = typer.Option(
        None, "--audit", help="reference generations for defenses that replace generate: sample (default: those "
                              "already cached + a share of prompts) | all | off (cached only); changes the trace, "
                              "never a metric; each cell record states it"),
    audit_fraction: Optional[float] = typer.Option(None, "--audit-fraction",
                                                   help="share of prompts --audit sample generates (default 0.1)"),
    measure: bool = typer.Option(True, "--measure/--no-measure", help="with --dry-run: measure this machine's token "
                                 "rates for a model that has none stored (`ragleak models --bench`; ~25 s each)"),
) -> None:
    """Run attacks x defenses x corpora x modes x epsilons; resumable, cached, local or on Ray."""
    from ragleak.files import check_output_dir
    from ragleak.grid.runner import run_grid, run_workers
    from ragleak.grid.spec import budget_lines, load_grid_config
    from ragleak.grid.spec import preset as load_preset

    from ragleak.report.gates import parse_gates

    gates = parse_gates(fail_if)  # a malformed gate fails before any cell runs
    if (preset is None) == (config is None):
        raise ConfigError("give exactly one of --preset or --config")
    if not dry_run and out is None:
        raise ConfigError("--out is required unless --dry-run")
    grid = load_preset(preset) if preset else load_grid_config(config)
    overrides = {k: v for k, v in (("audit", audit), ("audit_fraction", audit_fraction)) if v is not None}
    if overrides:
        grid = grid_with(grid, overrides)
    # validate, then run: every name resolved, every parameter model built and every corpus
    # digested before the run folder exists, so a bad config writes nothing
    cells = grid.expand()
    if dry_run:
        dry_run_report(grid, cells, run_workers(workers), measure, as_json)
        return
    check_output_dir(out)

    def show(p) -> None:
        eta = "?" if p.eta_s is None else duration(p.eta_s)  # the cells left at their dry-run estimates, rescaled
        console.print(f"cells {p.done}/{p.total}  errors {p.errors}  failed {p.failed}  partial {p.partial}  model calls {p.model_calls}  "
                      f"cache hit rate {p.cache_hit_rate:.0%} ({p.cache_waited} waited)  ETA {eta}", highlight=False)

    state = run_grid(grid, out, executor=executor, workers=workers, retry_errors=retry_errors,
                     address=address, progress=None if as_json else show, rebuild_cache=rebuild_cache,
                     cells=cells)
    unmeasured = unmeasured_cells(out, cells)
    result = {"out": str(out), "cells": state.total, "ran": state.ran, "errors": state.errors,
              "unmeasured": [{"label": label, "reason": reason} for label, reason in unmeasured],
              "failed": state.failed, "partial": state.partial, "model_calls": state.model_calls, "cache_hits": state.cache_hits,
              "cache_waited": state.cache_waited, "worker_restarts": state.worker_restarts}
    if as_json:
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
    else:
        console.print(f"done: {state.total} cells in {out} ({state.ran} run now, {state.errors} errors, "
                      f"{state.failed} failed, {state.partial} partial)")
        if state.worker_restarts:
            console.print(f"{state.worker_restarts} Ray actors died mid-cell and were replaced; their cells ran "
                          "again (a cell that took down two is an error record)")
    if gates:
        from ragleak.report.build import build_report

        paths = build_report(out, gates=gates)
        outcomes = json.loads(Path(paths["summary"]).read_text(encoding="utf-8"))["gates"]
        for gate in outcomes:
            console.print(("FAIL " if gate["failed"] else "ok ") + gate["message"], highlight=False, markup=False,
                          soft_wrap=True)
        if any(g["failed"] for g in outcomes):
            raise typer.Exit(EXIT_GATES)
    if unmeasured:
        if not as_json:
            console.print(f"{len(unmeasured)} of {len(cells)} cells have no readings: "
                          + "; ".join(f"{label}: {reason}" for label, reason in unmeasured[:5])
                          + (f"; and {len(unmeasured) - 5} more" if len(unmeasured) > 5 else "")
                          + " (`ragleak report` names each; `--retry-errors` reruns them)",
                          highlight=False, markup=False, soft_wrap=True)
        raise typer.Exit(EXIT_CELLS)


def unmeasured_cells(out: Path, cells) -> list[tuple[str, str]]:
    """(label, reason) of each planned cell that crashed, failed or has no record, this run or an earlier one."""
    from ragleak.grid.store import MEASURED, RunStore

    store = RunStore(out)
    found = []
    for cell in cells:
        record = store.read(cell.cell_id)
        if record is None:
            found.append((cell.label, "record corrupt" if cell.cell_id in store.corrupt else "no record"))
        elif record.status not in MEASURED:
            found.append((cell.label, record.failure.reason if record.failure else record.error or record.status))
    return found


def dry_run_report(grid, cells, workers: int, measure: bool, as_json: bool) -> None:
    """Print the plan: its cells, distinct generation streams, model calls and ETA (``grid.eta``),
    with the error band of the committed check (``benchmarks/bench_eta.py``)."""
    from dataclasses import asdict

    from ragleak.grid.eta import grid_eta, stored_rates
    from ragleak.grid.spec import budget_lines

    if measure:
        from ragleak.rag.speed import measure_missing

        measure_missing({(c.stack.model, c.stack.n_threads or 1) for c in cells}, announce=lambda m, t: console.print(
            f"measuring {m}'s token rates on this machine ({t} thread{'s' if t > 1 else ''}, once; kept for later ETAs)"))
    rates = stored_rates(cells)
    eta = grid_eta(cells, rates, workers)
    check = committed_check()
    if as_json:
        plan = {"cells": eta.cells, "distinct_generation_streams": eta.streams, "model_calls": eta.model_calls,
                "workers": eta.workers, "eta_s": eta.expected_s, "eta_upper_s": eta.upper_s,
                "missing_rates": list(eta.missing_rates), "rates": {m: asdict(r) for m, r in rates.items()},
                "check": check, "budgets": budget_lines(grid, cells), "plan": [c.label for c in cells]}
        sys.stdout.write(json.dumps(plan, indent=2) + "\n")
        return
    for cell in cells:
        console.print(cell.label, highlight=False)
    for line in budget_lines(grid, cells):
        console.print(line, highlight=False)
    console.print(f"{eta.cells} cells; {eta.streams} distinct generation streams ({eta.cells - eta.streams} cells "
                  f"share another's generations via the cache); about {eta.model_calls} model calls", highlight=False)
    if eta.expected_s is None or eta.upper_s is None:
        console.print(f"ETA: unknown (no measured rates of {', '.join(eta.missing_rates)}: `ragleak models --bench`)")
        return
    console.print(f"ETA on {workers} worker{'s' if workers > 1 else ''} ~{duration(eta.expected_s)} (expected), "
                  f"<= {duration(eta.upper_s)} (upper bound: every answer to max_tokens)", highlight=False)
    console.print("  rates: " + "; ".join(f"{m} prefill {r.prefill_tok_s}, decode {r.decode_tok_s} tokens/s"
                                          for m, r in rates.items()), highlight=False)
    if check is not None:
        console.print(f"  error band from one committed check: a real run of {check['cells']} cells took "
                      f"{check['ratio']:.2f}x of its expected ETA ({check['path']})", highlight=False)


def committed_check() -> dict | None:
    """The newest committed ETA check (``benchmarks/results/bench_eta-*.json`` of a source
    checkout, by its start time): its cells, the measured over the expected time and its path;
    None where there is none."""
    import ragleak

    results = Path(ragleak.__file__).resolve().parents[2] / "benchmarks" / "results"
    checks = []
    for path in results.glob("bench_eta-*.json"):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            checks.append((str(data["started_at"]), {"cells": int(data["cells"]), "ratio": float(data["ratio"]),
                                                     "path": str(path.relative_to(results.parents[1]))}))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return max(checks, key=lambda c: c[0])[1] if checks else None


def duration(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.1f} min"


def grid_with(grid, overrides: dict):
    """``grid`` with command-line settings applied, validated as the YAML would be."""
    from pydantic import ValidationError

    try:
        return type(grid).model_validate({**grid.model_dump(mode="json"), **overrides})
    except ValidationError as exc:
        raise ConfigError(validation_message(exc, "grid options")) from exc
