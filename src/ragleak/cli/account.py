"""`ragleak account DEFENSE`: print a defense's guarantee card and write it as JSON."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ragleak.cli.tables import show

from ragleak.errors import ConfigError

SHOWN = ("answers", "answers+citations", "retrieved-ids")


def _fmt(value: float) -> str:
    if math.isinf(value):
        return "inf"
    return f"{value:.4g}"


def account_command(
    defense: str = typer.Argument(..., help="defense name (see the defenses registry)"),
    queries: Optional[int] = typer.Option(None, "--queries", help="also evaluate eps(T) at this T"),
    docs_per_person: Optional[int] = typer.Option(None, "--docs-per-person", help="m: person-level unit by group privacy"),
    boundary: Optional[str] = typer.Option(None, "--boundary", help="what the target shows: answers (default) | answers+citations | retrieved-ids"),
    delta: float = typer.Option(1e-6, "--delta", help="target delta for the tight accountants"),
    as_json: bool = typer.Option(False, "--json", help="print machine-readable JSON"),
    out: Optional[Path] = typer.Option(None, "--out", help="write the card as JSON to this file"),
    params: Optional[str] = typer.Option(None, "--params", help='defense parameters as JSON, e.g. \'{"pool": 20}\''),
    corpus: Optional[str] = typer.Option(None, "--corpus", help="check the card's assumptions against this corpus "
                                         "as the stack config chunks it (a name or a path)"),
    config: Optional[Path] = typer.Option(None, "--config", help="YAML stack config (its chunking, with --corpus)"),
) -> None:
    """Print the guarantee card: unit, adjacency, scope, boundary, assumptions checked against this
    configuration, eps(T) at T = 1, 10, 100, 1000, and why it is void if it is."""
    from ragleak.accounting.card import CARD_QUERIES, build_card
    from ragleak.cli.attack import _params
    from ragleak.defenses import make_defense

    if queries is not None and queries < 0:
        raise ConfigError("--queries must be >= 0")
    if docs_per_person is not None and docs_per_person < 1:
        raise ConfigError("--docs-per-person must be >= 1")
    if boundary is not None and boundary not in SHOWN:
        raise ConfigError(f"--boundary must be one of {', '.join(SHOWN)}; got {boundary!r}")
    if not 0.0 < delta < 1.0:
        raise ConfigError("--delta must be in (0, 1)")
    instance = make_defense(defense, **_params(params))
    if corpus is not None:
        _observe_corpus(instance, corpus, config)
    points = CARD_QUERIES + ((queries,) if queries is not None else ())
    card = build_card(defense, instance.guarantee(), params=instance.params.model_dump(mode="json"),
                      queries=points, docs_per_person=docs_per_person, shown=boundary, delta=delta)
    text = card.model_dump_json(indent=2) + "\n"  # infinite eps is written as the string "Infinity"
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(out.suffix + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(out)
    if as_json:
        sys.stdout.write(text)
    else:
        _render(card)


def _observe_corpus(instance, corpus: str, config: Optional[Path]) -> None:
    """Tell a corpus-checking defense the facts of ``corpus`` chunked as the stack would index it."""
    from ragleak.config import load_stack_config
    from ragleak.corpora import load_corpus
    from ragleak.corpora.chunking import chunk_documents
    from ragleak.defenses.corpus_pool import CorpusFacts, CorpusPool

    pool = getattr(instance, "corpus", None)
    if not isinstance(pool, CorpusPool):
        return  # this defense's card does not depend on the corpus
    c = load_stack_config(config)
    passages = [p for p in chunk_documents(load_corpus(corpus), c.chunk_words, c.chunk_overlap) if p.text.strip()]
    pool.assume(CorpusFacts.of_passages(passages))


def _render(card) -> None:
    console = Console()
    console.rule(f"guarantee card: {card.defense}")
    if card.void_reason:
        console.print(f"[bold red]VOID[/bold red]      {escape(card.void_reason)}", highlight=False)
    console.print(f"[bold]unit[/bold]      {card.unit}; {escape(card.group)}", highlight=False)
    console.print(f"[bold]adjacency[/bold] {escape(card.adjacency)}", highlight=False)
    console.print(f"[bold]scope[/bold]     {escape(card.scope)}", highlight=False)
    console.print(f"[bold]resets[/bold]    {escape(card.resets)}", highlight=False)
    console.print(f"[bold]boundary[/bold]  claim covers {card.claim_boundary}; target shows {card.shown_boundary}"
                  + (f"; {card.noise}" if card.noise else ""))
    for a in card.assumptions:
        mark = {True: "[green]met[/green]", False: "[red]VIOLATED[/red]", None: "[yellow]unchecked[/yellow]"}[a.met]
        console.print(f"[bold]assumes[/bold]   {escape(a.name)}: {mark} - {escape(a.detail or a.statement)}",
                      highlight=False)
    table = Table(title=f"eps(T) at delta target {card.delta_target:g}")
    for col in ("T", "basic eps", "basic delta", "tight eps", "tight delta", "tight method", "RDP eps",
                f"claim eps ({card.claim_boundary})"):
        table.add_column(col, justify="right")
    for row in card.curve:
        table.add_row(str(row.queries), _fmt(row.basic.eps), _fmt(row.basic.delta), _fmt(row.tight.eps),
                      _fmt(row.tight.delta), row.tight.method, _fmt(row.rdp.eps), _fmt(row.claim.eps))
    show(console, table)
    for warning in card.warnings:
        console.print(f"[yellow]warning:[/yellow] {warning}", highlight=False)
    if card.notes:
        console.print(f"notes: {card.notes}", highlight=False)
