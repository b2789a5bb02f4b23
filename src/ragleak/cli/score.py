"""`ragleak score TRANSCRIPT...`: every metric that applies to transcripts written by `ragleak attack`,
computed through the one metric path; `--out RUN` also writes a run directory `ragleak report` reads."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from ragleak.cli.tables import metric_results_table, show

console = Console()

CorpusOpt = typer.Option(None, "--corpus", help="the corpus the target indexed (a folder of your files or a corpus "
                         "name): ground truth for the extraction and PII metrics")
ViewOpt = typer.Option(None, "--view", help="a corpus view JSON (MI candidates and member labels, canary secrets) or "
                       "a canary manifest (`ragleak canary plant`)")
FailIfOpt = typer.Option(None, "--fail-if", help='a CI gate "METRIC OP NUMBER", e.g. "pii_leaks>0" (repeatable): '
                         "exit 1 when a measured cell trips it or none has the reading")


def score_command(
    transcripts: list[Path] = typer.Argument(..., help="transcript JSON files, or folders of them"),
    corpus: Optional[str] = CorpusOpt,
    view: Optional[Path] = ViewOpt,
    label: Optional[str] = typer.Option(None, "--label", help="the name the report groups these transcripts by "
                                        "(default: the defense in their traces, else the target's name)"),
    out: Optional[Path] = typer.Option(None, "--out", help="also write a run directory here (`ragleak report OUT`)"),
    fail_if: Optional[list[str]] = FailIfOpt,
    config: Optional[Path] = typer.Option(None, "--config", help="YAML stack config (chunking, embedder)"),
    as_json: bool = typer.Option(False, "--json", help="print machine-readable JSON"),
) -> None:
    """Compute every metric that applies to the transcripts (answered queries only) and print them."""
    from ragleak.attacks.views import read_view
    from ragleak.config import load_stack_config
    from ragleak.grid.scored import scored, scoring_corpus, transcript_paths, write_run
    from ragleak.grid.spec import DEFAULT_MIN_ANSWERED_SHARE
    from ragleak.grid.store import transcript_status
    from ragleak.measure import run_attack
    from ragleak.grid.failure import of_transcript
    from ragleak.report.gates import check, parse_gates, save_gates
    from ragleak.stack import Stack

    gates = parse_gates(fail_if)
    cfg = load_stack_config(config) if config else load_stack_config()
    passages, corpus_label, corpus_digest = scoring_corpus(corpus, cfg)
    ctx = Stack(cfg).context(0)  # the metrics' models (an embedder) and their resampling seed
    paths = [p for source in transcripts for p in transcript_paths(source)]
    items = scored(paths, read_view(view) if view else None, corpus_label, corpus_digest, label)
    runs = [run_attack(item.transcript, None, ctx, passages) for item in items]  # the queries were sent already
    results = {str(item.path): run.metrics for item, run in zip(items, runs)}
    if out is not None:
        from ragleak.files import check_output_dir

        check_output_dir(out)
        write_run(out, items, runs)
    rows = [{"label": item.spec.label, "cell_id": item.spec.cell_id,
             "status": transcript_status(item.transcript, DEFAULT_MIN_ANSWERED_SHARE),
             "stopped": item.transcript.stopped,
             "metrics": {k: r.value for k, r in results[str(item.path)].items()},
             "metric_n": {k: r.n for k, r in results[str(item.path)].items()}} for item in items]
    # a stopped or failed transcript is evidence missing: it fails every gate, named with its reason
    failures = {item.spec.cell_id: of_transcript(item.transcript) for item, row in zip(items, rows)
                if row["status"] == "failed"}
    outcomes = check(gates, rows, [{"cell_id": row["cell_id"], "label": row["label"], "status": "failed",
                                    "reason": failures[row["cell_id"]].reason}
                                   for row in rows if row["cell_id"] in failures], planned=len(rows))
    if out is not None and gates:
        save_gates(out, gates)  # a later `ragleak report OUT` checks the same gates
    if as_json:
        sys.stdout.write(json.dumps({"transcripts": {p: {k: r.model_dump(mode="json") for k, r in res.items()}
                                                     for p, res in results.items()},
                                     "cells": {str(item.path): {"status": row["status"], "stopped": row["stopped"]}
                                               for item, row in zip(items, rows)},
                                     "gates": [o.model_dump() | {"failed": o.failed} for o in outcomes],
                                     "out": None if out is None else str(out)}, indent=2) + "\n")
    else:
        for item, row in zip(items, rows):
            # a stopped session is a failed cell: its readings are shown, but no gate reads them
            failed = f" - failed, not a measurement: {row['stopped']}" if row["status"] == "failed" else ""
            show(console, metric_results_table(f"{item.path} ({item.spec.defense}){failed}", results[str(item.path)]))
        for o in outcomes:
            console.print(o.message, highlight=False, soft_wrap=True, markup=False)
        if out is not None:
            console.print(f"run directory: {out} (`ragleak report {out}`)", highlight=False, soft_wrap=True)
    if any(o.failed for o in outcomes):
        raise typer.Exit(1)
