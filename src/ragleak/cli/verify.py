"""`ragleak verify DEFENSE`: an empirical privacy test of the defense's real code path against
its guarantee card. The verdict is holds, broken, inconclusive or void; the exit status is 0 only
for holds (``verify.result.EXIT_CODES``: broken 1, inconclusive 3, void 4; usage errors 2)."""

from __future__ import annotations

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
    defense: str = typer.Argument(..., help="defense name (see the defenses registry) or path/to/file.py:Class"),
    params: Optional[list[str]] = typer.Option(None, "--params", "-p", help="defense parameter key=value (repeatable, or comma-separated)"),
    trials: int = typer.Option(10000, "--trials", help="most trials per corpus per scenario (sequential looks stop earlier when decided)"),
    max_seconds: float = typer.Option(600.0, "--max-seconds", help="wall-clock budget; scenarios cut short read inconclusive"),
    max_trials: Optional[int] = typer.Option(None, "--max-trials", help="planned maximum trials per world: undecided scenarios go on past --trials (2x, 4x, ...) while --extend-cpu-seconds allows (default 4 x --trials; = --trials: no extension)"),
    extend_cpu_seconds: float = typer.Option(300.0, "--extend-cpu-seconds", help="CPU seconds of the run after which no extension look starts"),
    queries: int = typer.Option(0, "--queries", help="also ask the single-document pair T times per trial (new conversations) against eps(T)"),
    stress: Optional[list[str]] = typer.Option(None, "--stress", help="only these stresses: contested, single, multi-chunk, pool-edge, near-duplicate, chunk-count (repeatable)"),
    adjacency: str = typer.Option("both", "--adjacency", help="both: substitution and add/remove pairs; card: the card's own adjacency only"),
    colluders: Optional[list[int]] = typer.Option(None, "--colluders", help="k colluding principals for a card with a budget (repeatable; default 1 2 4 8)"),
    per_token: bool = typer.Option(True, "--per-token/--no-per-token", help="for a defense with max_new_tokens: also test the per-token claim"),
    alpha: float = typer.Option(0.05, "--alpha", help="family-wise error level of a broken verdict"),
    seed: int = typer.Option(0, "--seed"),
    config: Optional[Path] = typer.Option(None, "--config", help="YAML stack config: top_k and candidate_k of the pipeline"),
    json_path: Optional[Path] = typer.Option(None, "--json", help="write the report as JSON to this file ('-': stdout)"),
) -> None:
    """Run the defense's hooks on neighbouring corpora and judge its card: holds (tested to eps X
    at T), broken (event, p(D), p(D'), eps_lb), inconclusive (the claim is above what the trials
    can show: the ceiling and the finest testable claim) or void card (nothing to verify). Exit
    status: 0 holds, 1 broken, 2 usage error, 3 inconclusive, 4 void."""
    from ragleak.config import load_stack_config
    from ragleak.defenses import DEFENSES, defense_class, make_defense
    from ragleak.verify import STRESSES, VerifySettings, verify_defense
    from ragleak.verify.run import COLLUDERS

    if adjacency not in ADJACENCIES:
        raise ConfigError(f"--adjacency must be one of {', '.join(ADJACENCIES)}; got {adjacency!r}")
    unknown = set(stress or ()) - set(STRESSES)
    if unknown:
        raise ConfigError(f"unknown --stress {sorted(unknown)}; known: {', '.join(STRESSES)}")
    defense_params = parse_params(params)
    cls = defense_class(defense)  # a registered name or path/to/file.py:Class
    try:
        instance = cls(**defense_params)
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        raise ConfigError(f"defense {defense!r}: bad parameters: {exc}") from exc
    if not instance.guarantee().is_formal:
        raise ConfigError(f"defense {defense!r} claims no formal guarantee: there is no epsilon to verify "
                          f"(DP defenses: {', '.join(n for n in DEFENSES.names() if make_defense(n).guarantee().is_formal)})")
    stack = load_stack_config(config)
    settings = VerifySettings(trials=trials, alpha=alpha, seed=seed, top_k=stack.top_k, candidate_k=stack.candidate_k,
                              stresses=tuple(stress) if stress else STRESSES, queries=queries,
                              adjacencies=adjacency, max_seconds=max_seconds,  # type: ignore[arg-type]
                              max_trials=max_trials, extend_cpu_seconds=extend_cpu_seconds,
                              colluders=tuple(colluders) if colluders else COLLUDERS, per_token=per_token)
    err = Console(stderr=True)
    with err.status(f"verify {defense}: up to {trials} trials per world") as status:
        report = verify_defense(cls, defense_params, settings, progress=lambda line: status.update(line))
    text = report.model_dump_json(indent=2) + "\n"
    if json_path is not None and str(json_path) == "-":
        sys.stdout.write(text)
    else:
        if json_path is not None:
            from ragleak.files import atomic_write_text

            json_path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(json_path, text)
        render(report, Console())
    if report.exit_code:
        raise typer.Exit(report.exit_code)


_STYLE = {"holds": "green", "broken": "bold red", "inconclusive": "yellow", "void": "bold magenta"}


def render(report, console: Console) -> None:
    from ragleak.verify.result import fmt

    console.rule(f"verify: {escape(report.defense)} (v{report.version})")
    console.print(f"boundary {report.boundary}; adjacency {report.adjacency} ({escape(report.adjacency_source)}); "
                  f"up to {report.trials} trials per world, looks at {', '.join(map(str, report.looks))}; "
                  f"alpha {report.alpha:g} for the whole run; pool candidate_k={report.candidate_k}, "
                  f"top_k={report.top_k}; ceiling {fmt(report.ceiling)} per scenario at the full trials",
                  highlight=False)
    table = Table()
    for col in ("scenario", "claim", "trials", "eps_lb", "verdict"):
        table.add_column(col, justify="right" if col in ("claim", "trials", "eps_lb") else "left")
    for s in report.scenarios:
        word = s.verdict.value if s.verdict is not None else "n/a"
        style = _STYLE.get(word, "dim")
        table.add_row(escape(s.name), fmt(s.claim.eps if s.claim else None), str(s.trials),
                      fmt(s.max_eps_lb) if s.trials else "-", f"[{style}]{escape(s.line)}[/{style}]")
    console.print(table)
    console.print(f"{escape(report.line)} in {report.seconds:.1f}s (exit {report.exit_code})",
                  style=_STYLE[report.verdict.value], highlight=False)
