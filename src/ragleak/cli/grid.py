"""`ragleak grid`: plan (--dry-run) or run a grid, with a progress line."""

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


def grid_command(
    preset: Optional[str] = typer.Option(None, "--preset", help="demo | paper | canary"),
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
    observe: Optional[Path] = typer.Option(None, "--observe", help="with --dry-run: price decoding at the answer "
                                           "lengths observed in this earlier grid run's generation cache "
                                           "(default: the lengths measured on this project's runs)"),
    measure: bool = typer.Option(True, "--measure/--no-measure", help="with --dry-run: measure this machine's token "
                                 "rates for a model that has none stored (`ragleak models --bench`; ~35 s each)"),
) -> None:
    """Run attacks x defenses x corpora x modes x epsilons; resumable, cached, local or on Ray."""
    from ragleak.files import check_output_dir
    from ragleak.grid.plan import plan_summary
    from ragleak.grid.runner import run_grid, run_workers
    from ragleak.grid.spec import budget_lines, load_grid_config
    from ragleak.grid.spec import preset as load_preset

    from ragleak.report.gates import parse_gates

    gates = parse_gates(fail_if)  # a malformed gate fails before any cell runs
    if (preset is None) == (config is None):
        raise ConfigError("give exactly one of --preset or --config")
    if observe is not None and not dry_run:
        raise ConfigError("--observe is a --dry-run option")
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
        from ragleak.grid.completions import observe as observed

        completions = observed(observe) if observe is not None else None
        n_workers = run_workers(workers)
        if measure:
            from ragleak.rag.speed import measure_missing

            measure_missing({(c.stack.model, c.stack.n_threads or 1) for c in cells}, copies=n_workers,
                            announce=lambda m, t, n: console.print(
                                f"measuring {m}'s token rates on this machine ({t} thread"
                                + (f", {n} copies at once" if n > 1 else "") + ", once; kept for later ETAs)"))
        plan = {**plan_summary(grid, cells, completions=completions, workers=n_workers),
                "budgets": budget_lines(grid, cells)}
        if as_json:
            sys.stdout.write(json.dumps(plan, indent=2) + "\n")
        else:
            for label in plan["plan"]:
                console.print(label, highlight=False)
            for line in plan["budgets"]:
                console.print(line, highlight=False)
            console.print(f"{plan['cells']} cells; {plan['distinct_generation_streams']} distinct generation "
                          f"streams ({plan['shared_by_cache']} cells share another's generations via the cache)")
            for kind, row in plan["by_kind"].items():
                console.print(f"  {kind}: {row['cells']} cells, {row['streams']} streams", highlight=False)
            console.print(f"about {plan['queries']} target queries, {plan['model_calls']} model calls, "
                          f"{plan['generations']} generations' worth of decoding (audit {plan['audit']['mode']})")
            if plan["eta_s"] is None:
                console.print(f"ETA: unknown ({plan['eta_basis']['hint']})")
            else:
                console.print(eta_line(plan), highlight=False)
                parallel = plan["workers_eta"]
                if parallel["workers"] > 1:
                    console.print(f"  on {parallel['workers']} workers: " + (
                        f"~{duration(parallel['eta_s'])} (<= {duration(parallel['eta_upper_s'])}), at the rates of "
                        f"{parallel['workers']} models running at once: {rates_text(parallel['rates'])}"
                        if parallel["eta_s"] is not None else f"unknown ({parallel['hint']})"), highlight=False)
                basis = plan["eta_basis"]
                console.print(f"  rates: {rates_text(basis['rates'])}", highlight=False)
                console.print(f"  prompts: {prompts_text(basis['prompt_tokens'])}", highlight=False)
                console.print(f"  answer lengths: {source_text(basis['completions'])}", highlight=False)
                attacks = ", ".join(f"{a} ~{duration(t['expected_s'])} (<= {duration(t['upper_s'])})"
                                    for a, t in basis["by_attack"].items())
                split = basis["expected_split_s"]
                share = split["prefill"] / max(split["prefill"] + split["decode"], 1)
                console.print(f"  by attack: {attacks}; expected time {share:.0%} prompt prefill, "
                              f"{1 - share:.0%} decoding", highlight=False)
                defenses = ", ".join(f"{d} ~{duration(t['expected_s'])}" for d, t in basis["by_defense"].items())
                console.print(f"  by defense: {defenses}", highlight=False)
                ended = basis["completions"].get("queries_sent") or {}
                if ended:
                    console.print("  ends on its own (observed; queries per stream expected of the budget): " + ", ".join(
                        f"{a} ~{r['expected'] / r['streams']:.0f} of {r['budgeted'] / r['streams']:.0f}"
                        for a, r in ended.items()), highlight=False)
                bare = basis.get("context_budget") or {}
                if bare:
                    console.print("  answered without passages after the defense's context budget (expected "
                                  "generations; a bare question is shared by every cell that sends it): " + ", ".join(
                                      f"{d} {u['with_context']:.0f} with passages, {u['bare']:.0f} bare"
                                      for d, u in bare.items()), highlight=False)
                if basis["completions"]["unobserved_at_cap"]:
                    console.print(f"  no observed answer length (priced at the cap): "
                                  f"{', '.join(basis['completions']['unobserved_at_cap'])}", highlight=False)
        return
    check_output_dir(out)

    def show(p) -> None:
        eta = "?" if p.eta_s is None else f"{p.eta_s:.0f}s"
        console.print(f"cells {p.done}/{p.total}  errors {p.errors}  failed {p.failed}  partial {p.partial}  model calls {p.model_calls}  "
                      f"cache hit rate {p.cache_hit_rate:.0%} ({p.cache_waited} waited)  ETA {eta}", highlight=False)

    state = run_grid(grid, out, executor=executor, workers=workers, retry_errors=retry_errors,
                     address=address, progress=None if as_json else show, rebuild_cache=rebuild_cache,
                     cells=cells)
    result = {"out": str(out), "cells": state.total, "ran": state.ran, "errors": state.errors,
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
            raise typer.Exit(1)


def eta_line(plan: dict) -> str:
    """The dry run's ETA: expected (observed answer lengths) and the upper bound (every decode to its cap)."""
    return (f"ETA on one worker ~{duration(plan['eta_s'])} (expected), <= {duration(plan['eta_upper_s'])} "
            f"(upper bound at max_tokens)")


def rates_text(rates: dict) -> str:
    """The plan's measured token rates, one clause per model and thread count."""
    out = []
    for key, r in rates.items():
        model, _, threads = key.rpartition("@")
        count, _, copies = threads.partition("x")
        where = f"{count} thread{'s' if count != '1' else ''}" + (f", {copies} copies at once" if copies else "")
        capped = f"; capped at one copy's {' and '.join(k.split('_')[0] for k in r['capped_at_one_copy'])}" \
            if r.get("capped_at_one_copy") else ""
        out.append(f"{model} ({where}) prefill {r['prefill_tok_s']}, decode {r['decode_tok_s']} tokens/s, "
                   f"measured {str(r.get('measured_at', '?'))[:16].replace('T', ' ')} at load {r.get('load_1m', '?')}{capped}")
    return "; ".join(out) or "none stored"


def prompts_text(prompts: dict) -> str:
    """Prompt lengths per corpus (and model): the frame plus ``top_k`` passages of their mean length."""
    return "; ".join(f"{label} {p['prompt_tokens']} tokens (frame {p['frame_tokens']} + {p['top_k']} passages "
                     f"of {p['passage_tokens']}, {p['passages']} passages counted)" for label, p in prompts.items()) \
        or "estimated (no corpus read)"


def source_text(completions: dict) -> str:
    """Where the answer lengths come from: the newest measurement, and how many earlier tables it
    was merged with (``--json``, ``eta_basis.completions``, names them; each row names its run)."""
    earlier = len(completions.get("earlier_sources") or ())
    return completions["source"] + (f" (merged with {earlier} earlier table{'s' if earlier > 1 else ''}; "
                                    "--json names them, and the table each row's run)" if earlier else "")


def duration(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.1f} min"


def grid_with(grid, overrides: dict):
    """``grid`` with command-line settings applied, validated as the YAML would be."""
    from pydantic import ValidationError

    try:
        return type(grid).model_validate({**grid.model_dump(mode="json"), **overrides})
    except ValidationError as exc:
        raise ConfigError(validation_message(exc, "grid options")) from exc
