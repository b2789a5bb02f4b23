"""`ragleak canary plant DIR --out DIR2` and `ragleak mi view --members DIR --non-members DIR --out FILE`:
the files an audit of your own RAG service starts from (format: docs/own-corpus.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

console = Console()
canary_app = typer.Typer(no_args_is_help=True, help="Plant canaries in a copy of your corpus.")
mi_app = typer.Typer(no_args_is_help=True, help="Build membership-inference views from your documents.")


@canary_app.command("plant")
def canary_plant(
    source: Path = typer.Argument(..., help="your corpus folder (.txt/.md/.jsonl/.csv)"),
    out: Path = typer.Option(..., "--out", help="the planted copy to write (a new folder): load it into your system"),
    n: int = typer.Option(10, "--n", help="canaries to plant (half e-mail addresses, half person names), one per document"),
    seed: int = typer.Option(0, "--seed", help="picks the canaries and the documents and places they go"),
    manifest: Optional[Path] = typer.Option(None, "--manifest", help="where to write the manifest "
                                            "(default: OUT.canaries.json beside OUT, never inside it)"),
    text_column: str = typer.Option("text", "--text-column", help="JSONL field / CSV column holding the text"),
    as_json: bool = typer.Option(False, "--json", help="print the manifest as JSON"),
) -> None:
    """Copy SOURCE to --out with out-of-vocabulary e-mail and person-name canaries, and write the manifest
    (`ragleak attack canary --view MANIFEST` or `ragleak score TRANSCRIPT --view MANIFEST` score them)."""
    from ragleak.attacks.plant import manifest_path, plant_folder

    target = manifest or manifest_path(out)
    result = plant_folder(source, out, n=n, seed=seed, text_column=text_column, manifest=target)
    if as_json:
        sys.stdout.write(result.model_dump_json(indent=2) + "\n")
        return
    for c in result.canaries:
        console.print(f"{c.id} ({c.kind}) -> {c.doc_id}", highlight=False, soft_wrap=True)
    console.print(f"planted {len(result.canaries)} canaries in {out}; manifest: {target} (keep it out of the "
                  "corpus you index)", highlight=False, soft_wrap=True)


@mi_app.command("view")
def mi_view_command(
    members: Path = typer.Option(..., "--members", help="documents your system indexed"),
    non_members: Path = typer.Option(..., "--non-members", help="comparable documents it did not index"),
    out: Path = typer.Option(..., "--out", help="the view JSON to write (for `ragleak attack mi --view`)"),
    topic: Optional[str] = typer.Option(None, "--topic", help="a domain keyword the attacker may know"),
    as_json: bool = typer.Option(False, "--json", help="print a machine-readable summary"),
) -> None:
    """Write the MI view: every document of both folders is a candidate, those of --members are members."""
    from ragleak.attacks.views import mi_view
    from ragleak.files import atomic_write_text, check_output_file

    check_output_file(out)
    view = mi_view(members, non_members, topic)
    atomic_write_text(out, view.model_dump_json(indent=2))
    info = {"out": str(out), "candidates": len(view.documents), "members": len(view.member_ids or []),
            "non_members": len(view.documents) - len(view.member_ids or [])}
    if as_json:
        sys.stdout.write(json.dumps(info, indent=2) + "\n")
    else:
        console.print(f"MI view {out}: {info['candidates']} candidates ({info['members']} members, "
                      f"{info['non_members']} non-members)", highlight=False, soft_wrap=True)
