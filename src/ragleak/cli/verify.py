"""`ragleak verify DEFENSE`: an empirical privacy test of the defense's real code path against
its guarantee card; exit status 1 when an event's epsilon lower bound exceeds the claim."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Optional

import typer
import yaml
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ragleak.errors import ConfigError

ADJACENCIES = ("both", "card")


def parse_params(items: list[str] | None) -> dict:
    """``k=v`` pairs (repeated, or comma-separated in one value) into defense parameters; each
    value is read as YAML (numbers, booleans, strings), as in a grid config."""
    out: dict = {}
    for item in items or []:
        for pair in item.split(","):
            if not pair.strip():
                continue
            key, sep, raw = pair.partition("=")
            if not sep or not key.strip():
                raise ConfigError(f"--params expects key=value, got {pair!r}")
            try:
                out[key.strip()] = yaml.safe_load(raw) if raw.strip() else ""
            except yaml.YAMLError as exc:
                raise ConfigError(f"--params {key.strip()}: cannot read {raw!r} ({exc})") from exc
    return out


def verify_command(
    defense: str = typer.Argument(..., help="defense name (see the defenses registry)"),
    params: Optional[list[str]] = typer.Option(None, "--params", "-p", help="defense parameter key=value (repeatable, or comma-separated)"),
    trials: int = typer.Option(2000, "--trials", help="trials per corpus per scenario"),
    queries: int = typer.Option(0, "--queries", help="also ask the single-document pair T times per trial (new conversations) against eps(T)"),
    stress: Optional[list[str]] = typer.Option(None, "--stress", help="only these stresses: single, multi-chunk, pool-edge, near-duplicate (repeatable)"),
    adjacency: str = typer.Option("both", "--adjacency", help="both: substitution and add/remove pairs; card: the card's own adjacency only"),
    alpha: float = typer.Option(0.05, "--alpha", help="family-wise error level (Bonferroni over every event)"),
    seed: int = typer.Option(0, "--seed"),
    config: Optional[Path] = typer.Option(None, "--config", help="YAML stack config: top_k and candidate_k of the pipeline"),
    json_path: Optional[Path] = typer.Option(None, "--json", help="write the report as JSON to this file ('-': stdout)"),
) -> None:
    """Run the defense's hooks on neighbouring corpora (a document substituted/removed, spanning
    two chunks, just outside the candidate pool, with a near-duplicate) and report per event
    p(D), p(D') and the Clopper-Pearson lower bound on epsilon against the card's claim."""
    from ragleak.config import load_stack_config
    from ragleak.defenses import DEFENSES, make_defense
    from ragleak.verify import STRESSES, VerifySettings, verify_defense

    if adjacency not in ADJACENCIES:
        raise ConfigError(f"--adjacency must be one of {', '.join(ADJACENCIES)}; got {adjacency!r}")
    unknown = set(stress or ()) - set(STRESSES)
    if unknown:
        raise ConfigError(f"unknown --stress {sorted(unknown)}; known: {', '.join(STRESSES)}")
    defense_params = parse_params(params)
    instance = make_defense(defense, **defense_params)  # validates the name and the parameters
    if not instance.guarantee().is_formal:
        raise ConfigError(f"defense {defense!r} claims no formal guarantee: there is no epsilon to verify "
                          f"(DP defenses: {', '.join(n for n in DEFENSES.names() if make_defense(n).guarantee().is_formal)})")
    stack = load_stack_config(config)
    settings = VerifySettings(trials=trials, alpha=alpha, seed=seed, top_k=stack.top_k, candidate_k=stack.candidate_k,
                              stresses=tuple(stress) if stress else STRESSES, queries=queries,
                              adjacencies=adjacency)  # type: ignore[arg-type]
    err = Console(stderr=True)
    with err.status(f"verify {defense}: {trials} trials per world") as status:
        report = verify_defense(defense, defense_params, settings, progress=lambda line: status.update(line))
    text = report.model_dump_json(indent=2) + "\n"
    if json_path is not None and str(json_path) == "-":
        sys.stdout.write(text)
    else:
        if json_path is not None:
            from ragleak.files import atomic_write_text

            json_path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(json_path, text)
        render(report, Console())
    if report.violated:
        raise typer.Exit(1)


def _fmt(x: float | None) -> str:
    if x is None:
        return "-"
    return "inf" if math.isinf(x) else f"{x:.3g}"


def render(report, console: Console) -> None:
    console.rule(f"verify: {report.defense} (v{report.version})")
    console.print(f"boundary {report.boundary}; adjacency {report.adjacency} ({escape(report.adjacency_source)}); "
                  f"{report.trials} trials per world; alpha {report.alpha:g} over {report.bounds} one-sided bounds; "
                  f"pool candidate_k={report.candidate_k}, top_k={report.top_k}; "
                  f"largest certifiable eps_lb {_fmt(report.ceiling)}", highlight=False)
    table = Table()
    for col in ("scenario", "claim", "eps_lb", "p(D)", "p(D')", "worst event / why not run"):
        table.add_column(col, justify="left" if col.startswith(("scenario", "worst")) else "right")
    for s in report.scenarios:
        if not s.applicable:
            table.add_row(f"[dim]{escape(s.name)}[/dim]", "-", "-", "", "", f"[dim]{escape(s.reason)}[/dim]")
            continue
        worst = max(s.events, key=lambda e: e.eps_lb) if s.events else None
        lb = f"[bold red]{_fmt(s.max_eps_lb)}[/bold red]" if s.violated else _fmt(s.max_eps_lb)
        table.add_row(escape(s.name), _fmt(s.claim.eps if s.claim else None), lb,
                      f"{worst.p_world:.3f}" if worst else "-", f"{worst.p_neighbour:.3f}" if worst else "-",
                      escape(worst.event) if worst else "-")
    console.print(table)
    for line in report.violations:
        console.print(f"[bold red]violation:[/bold red] {escape(line)}", highlight=False)
    console.print(f"{'VIOLATED' if report.violated else 'no event beats the claim'} in {report.seconds:.1f}s",
                  style="bold red" if report.violated else "green", highlight=False)
