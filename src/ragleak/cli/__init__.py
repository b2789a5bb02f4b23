"""The `ragleak` command line. Every command has --help; --json prints machine-readable output;
user errors print one line on stderr and exit with status 2."""

from __future__ import annotations

import json
import logging
import shutil
import sys
import time
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from ragleak.cli.tables import show

from ragleak.cli.attack import (AnswerPathOpt, ApiModelOpt, HeaderOpt, IdsPathOpt, RetriesOpt, ShapeOpt, TemplateOpt,
                                TimeoutOpt, endpoint_config)
from ragleak.errors import RagleakError

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, no_args_is_help=True,
                  help="Measure what a RAG pipeline leaks about its private corpus.")
index_app = typer.Typer(no_args_is_help=True, help="Build and inspect FAISS passage indexes.")
app.add_typer(index_app, name="index")
console = Console()
err_console = Console(stderr=True)

ConfigOpt = typer.Option(None, "--config", help="YAML stack config (top level or a `stack:` section)")
JsonOpt = typer.Option(False, "--json", help="print machine-readable JSON")
RebuildCacheOpt = typer.Option(False, "--rebuild-cache", help="move the generation cache aside and start a fresh one")
BudgetsOpt = typer.Option(None, "--budgets", help="SQLite file of the defense's budgets (ca-dp, private-rag charges); "
                          "default: INDEX.budgets.sqlite beside the index")
NoiseSeedOpt = typer.Option(None, "--noise-seed", help="fix the DP noise seed: a reproducible audit, not a deployment "
                            "(default: fresh OS entropy per process)")


def _config(config: Optional[Path], **overrides):
    from ragleak.config import load_stack_config

    return load_stack_config(config, **{k: v for k, v in overrides.items() if v is not None})


def _emit(data, as_json: bool, render) -> None:
    if as_json:
        sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    else:
        render(data)


@index_app.command("build")
def index_build(
    source: str = typer.Argument(..., help="a folder/file of .txt/.md/.jsonl/.csv, or a corpus name (synthetic-corp, synthetic-email, ...)"),
    out: Path = typer.Option(..., "--out", help="index directory to write"),
    config: Optional[Path] = ConfigOpt,
    seed: Optional[int] = typer.Option(None, help="seed for synthetic corpora"),
    kind: str = typer.Option("auto", "--kind", help="flat (exact), ivf, hnsw, or auto: flat up to 50,000 "
                             "passages, ivf above (DP retrieval defenses score every passage exactly on any kind)"),
    as_json: bool = JsonOpt,
) -> None:
    """Chunk a corpus, embed it and write a FAISS index directory (atomically). A killed build
    resumes from the embedded slices kept beside --out."""
    from ragleak.rag.index import KINDS
    from ragleak.stack import Stack

    from ragleak.cli.progress import embedding_progress

    if kind not in ("auto", *KINDS):
        raise typer.BadParameter(f"--kind must be auto, {', '.join(KINDS)}; got {kind!r}")
    cfg = _config(config)
    t0 = time.perf_counter()
    with embedding_progress(err_console) as progress:
        # embedded slices are kept beside --out until it is saved: a killed build resumes where it stopped
        work_dir = out.with_name(f".{out.name}.slices")
        index = Stack(cfg).index_corpus(source, seed=seed, progress=progress, work_dir=work_dir, kind=kind)
    index.save(out)
    shutil.rmtree(work_dir, ignore_errors=True)
    seconds = time.perf_counter() - t0
    info = {"index": str(out), "documents": len(index.doc_ids), "passages": len(index),
            "embedder": index.embedder.name, "kind": index.kind, "params": index.params, "seconds": round(seconds, 2),
            "passages_per_s": round(len(index) / seconds, 1) if seconds > 0 else None, **index.build_stats}
    stats = index.build_stats
    info["embedded_per_s"] = (round(stats["embedded"] / stats["embed_s"], 1)
                              if stats.get("embed_s") else None)  # the embedder's own rate, without startup
    _emit(info, as_json, lambda d: console.print(
        f"indexed {d['documents']} documents as {d['passages']} passages into a {d['kind']} index {d['index']} "
        f"in {d['seconds']}s ({d['passages_per_s']} passages/s"
        + (f"; {d['resumed']} passages resumed from a killed build's slices" if d.get("resumed") else "") + ")"))


@index_app.command("info")
def index_info(directory: Path = typer.Argument(...), as_json: bool = JsonOpt) -> None:
    """Show an index's manifest (documents, passages, embedder, source)."""
    from ragleak.rag.index import read_manifest

    manifest = read_manifest(directory)

    def render(m):
        table = Table(show_header=False)
        for key in ("embedder", "dim", "documents", "passages", "created"):
            table.add_row(key, str(m.get(key)))
        table.add_row("kind", str(m.get("kind", "flat")) + "".join(f" {k}={v}" for k, v in (m.get("params") or {}).items()))
        for key, value in (m.get("metadata") or {}).items():
            table.add_row(key, str(value))
        show(console, table)

    _emit(manifest, as_json, render)


@app.command()
def ask(
    question: str = typer.Argument(...),
    index: Optional[Path] = typer.Option(None, "--index", help="index directory (the built-in pipeline)"),
    endpoint: Optional[str] = typer.Option(None, "--endpoint", help="ask an HTTP endpoint instead of the built-in pipeline"),
    shape: str = ShapeOpt,
    request_template: Optional[str] = TemplateOpt,
    answer_path: Optional[str] = AnswerPathOpt,
    retrieved_ids_path: Optional[str] = IdsPathOpt,
    api_model: Optional[str] = ApiModelOpt,
    timeout: float = TimeoutOpt,
    retries: int = RetriesOpt,
    header: Optional[list[str]] = HeaderOpt,
    defense: str = typer.Option("none", help="defense name, or path/to/file.py:Class"),
    model: Optional[str] = typer.Option(None, help="model name (see `ragleak models`)"),
    trace: bool = typer.Option(False, "--trace", help="show the hook trace"),
    config: Optional[Path] = ConfigOpt,
    as_json: bool = JsonOpt,
    rebuild_cache: bool = RebuildCacheOpt,
    budgets: Optional[Path] = BudgetsOpt,
    noise_seed: Optional[int] = NoiseSeedOpt,
) -> None:
    """Ask the RAG pipeline (or an HTTP endpoint) one question. As `serve` does: DP noise from fresh OS
    entropy and the defense's budgets in the SQLite file beside the index, so asking again charges the
    same budget (a process per question would otherwise start every budget afresh)."""
    if (index is None) == (endpoint is None):
        raise typer.BadParameter("give exactly one of --index or --endpoint")
    from ragleak.pipeline.build import build_target

    if endpoint is not None:
        response = build_target(None, endpoint_config(endpoint, shape, request_template, answer_path,
                                                      retrieved_ids_path, api_model, timeout, retries, header)).answer(question)
        data = {"answer": response.answer, "retrieved_ids": response.retrieved_ids}

        def show(d) -> None:
            console.print(d["answer"], markup=False, highlight=False)
            if d["retrieved_ids"] is not None:
                console.print(f"retrieved: {', '.join(d['retrieved_ids'])}", markup=False, highlight=False)

        _emit(data, as_json, show)
        return
    from ragleak.defenses import make_defense
    from ragleak.stack import Stack

    cfg = _config(config, model=model)
    stack = Stack(cfg)
    if rebuild_cache:
        stack.rebuild_cache()
    from ragleak.defenses.budget_store import budgets_beside

    ctx = stack.context(noise_seed, noise="fresh" if noise_seed is None else "fixed-seed",
                        budgets=budgets or budgets_beside(index))
    result = build_target(stack, stack.load_index(index), make_defense(defense), ctx=ctx).answer(question)
    data = {"answer": result.answer}
    if trace:
        data["trace"] = result.trace.model_dump(mode="json")  # type: ignore[union-attr]

    def render(d):
        console.print(d["answer"])
        if trace:
            _print_trace(result.trace)

    _emit(data, as_json, render)


def _print_trace(trace) -> None:
    table = Table(title="retrieved context")
    table.add_column("passage")
    table.add_column("score", justify="right")
    for item in trace.context:
        table.add_row(item.passage_id, "-" if item.score is None else f"{item.score:.3f}")
    show(console, table)
    hooks = Table(title=f"hooks (defense: {trace.defense})")
    for col in ("hook", "changed", "channel", "in", "out", "ms"):
        hooks.add_column(col)
    for h in trace.hooks:  # changed: its own output; channel: what it fed (top-k, prompt, answer) vs the identity
        hooks.add_row(h.hook, "yes" if h.changed else "no", h.channel or "-", (h.digest_in or "unaudited")[:12],
                      h.digest_out[:12], f"{h.seconds * 1000:.1f}")
    show(console, hooks)
    console.print(f"cache hit: {trace.cache_hit}; timings: " + ", ".join(f"{k} {v:.2f}s" for k, v in trace.timings.items()))


@app.command()
def models(
    bench: bool = typer.Option(False, "--bench", help="measure prefill/decode tokens/s of each installed model now"),
    threads: Optional[int] = typer.Option(None, help="threads for --bench"),
    as_json: bool = JsonOpt,
) -> None:
    """List the packaged models: installed or not, size, how to install, speed (with --bench)."""
    from ragleak.rag.models import DEFAULT_MODEL, MODELS, is_installed

    rows = []
    for spec in MODELS.values():
        row = {"name": spec.name, "title": spec.title, "default": spec.name == DEFAULT_MODEL,
               "installed": is_installed(spec), "size_mb": round(spec.size / 1e6, 1),
               "license": spec.license, "install": spec.install_command}
        if bench and row["installed"]:
            from ragleak.rag.speed import measure_speed, save_speed

            row["speed"] = measure_speed(spec.name, n_threads=threads)
            save_speed(spec.name, row["speed"])  # the grid's --dry-run reads it for its ETA
        rows.append(row)

    def render(rs):
        table = Table(title="packaged models")
        for col in ("name", "installed", "MB", "prefill tok/s", "decode tok/s", "install"):
            table.add_column(col)
        for r in rs:
            speed = r.get("speed") or {}
            table.add_row(r["name"] + (" (default)" if r["default"] else ""), "yes" if r["installed"] else "no",
                          str(r["size_mb"]), str(speed.get("prefill_tok_s", "-")), str(speed.get("decode_tok_s", "-")),
                          "" if r["installed"] else r["install"])
        show(console, table)
        if not bench:
            console.print("speeds: run `ragleak models --bench` (measured now, on this machine)")

    _emit(rows, as_json, render)


@app.command()
def serve(
    index: Path = typer.Option(..., "--index"),
    defense: str = typer.Option("none", help="defense name, or path/to/file.py:Class"),
    host: str = typer.Option("127.0.0.1"),
    port: int = typer.Option(8765),
    config: Optional[Path] = ConfigOpt,
    rebuild_cache: bool = RebuildCacheOpt,
    budgets: Optional[Path] = BudgetsOpt,
    noise_seed: Optional[int] = NoiseSeedOpt,
) -> None:
    """Serve the pipeline as a JSON endpoint: POST /ask {"query": ...} -> {"answer", "retrieved_ids"}, and
    POST /v1/chat/completions in the OpenAI chat-completions shape. Deploy mode: DP noise from fresh OS
    entropy, budgets in a SQLite file that survives restarts (stop the server and delete it to reset)."""
    import uvicorn

    from ragleak.defenses import make_defense
    from ragleak.defenses.budget_store import budgets_beside
    from ragleak.pipeline.build import build_target
    from ragleak.serve import make_app
    from ragleak.stack import Stack

    stack = Stack(_config(config))
    if rebuild_cache:
        stack.rebuild_cache()
    store = budgets or budgets_beside(index)
    ctx = stack.context(noise_seed, noise="fresh" if noise_seed is None else "fixed-seed", budgets=store)
    instance = make_defense(defense)
    instance.prepare(ctx)  # opens its budget file now: a bad file or changed parameters fail before serving
    target = build_target(stack, stack.load_index(index), instance, ctx=ctx)
    err_console.print(f"noise: {ctx.noise}; budgets: {store}", highlight=False)
    uvicorn.run(make_app(target), host=host, port=port, log_level="warning")


@app.command()
def demo(
    out: Path = typer.Option(Path("runs/demo"), "--out", help="run directory (resumes if it exists)"),
    tour: bool = typer.Option(False, "--tour", help="only the short tour: build an index, ask, attack, show the trace"),
    workers: Optional[int] = typer.Option(None, "--workers", help="parallel workers (default: cores)"),
    config: Optional[Path] = ConfigOpt,
    as_json: bool = JsonOpt,
    rebuild_cache: bool = RebuildCacheOpt,
) -> None:
    """The main job on the default stack: the demo grid, then its report (audit dashboard first)."""
    if tour:
        _tour(out, config, as_json, rebuild_cache)
        return
    from ragleak.cli.grid import grid_command
    from ragleak.cli.report import report_command

    call_command(grid_command, preset="demo", out=out, workers=workers, rebuild_cache=rebuild_cache)
    call_command(report_command, run_dir=out, as_json=as_json)


def call_command(command, **values):
    """Call a typer command from Python with ``values``, every other parameter at its declared
    default: typer's defaults are ``OptionInfo`` objects, not values, outside the CLI (a command
    that grows an option must not break its Python callers)."""
    import inspect

    from typer.models import ParameterInfo

    args = {}
    for name, param in inspect.signature(command).parameters.items():
        default = param.default.default if isinstance(param.default, ParameterInfo) else param.default
        args[name] = values.pop(name) if name in values else default
        if args[name] is inspect.Parameter.empty or args[name] is ...:
            raise TypeError(f"{command.__name__}: no value for required parameter {name!r}")
    if values:
        raise TypeError(f"{command.__name__} has no parameter(s) {', '.join(sorted(values))}")
    return command(**args)


def _tour(out: Path, config: Optional[Path], as_json: bool, rebuild_cache: bool) -> None:
    from ragleak.cli.tour import run_demo

    result = run_demo(out, _config(config), rebuild_cache=rebuild_cache)

    def render(r):
        console.rule("ragleak tour: the default stack")
        console.print(f"corpus {r['corpus']}: {r['documents']} documents, {r['passages']} passages -> {r['index']} "
                      f"({r['index_kind']} index)")
        console.print(f"model {r['model']}, embedder {r['embedder']}, top-k {r['top_k']}")
        for step in r["steps"]:
            console.rule(step["title"])
            console.print(f"[bold]Q:[/bold] {step['query']}")
            console.print(f"[bold]A:[/bold] {step['answer']}")
            console.print(f"retrieved: {', '.join(step['retrieved'])}")
            if step.get("leaked"):
                console.print(f"[red]verbatim leaks (>= 40 chars) from {len(step['leaked'])} passage(s): {', '.join(step['leaked'])}[/red]")
            hooks = ", ".join(f"{h['hook']}={'changed' if h['changed'] else 'unchanged'}" for h in step["hooks"])
            console.print(f"hooks: {hooks}; {step['seconds']}s{' (cache hit)' if step['cache_hit'] else ''}")

    _emit(result, as_json, render)


# Commands that live in their own packages; one block per package, each added by its owner.
from ragleak.cli.attack import attack_command  # noqa: E402

app.command("attack")(attack_command)
from ragleak.cli.account import account_command  # noqa: E402
app.command("account")(account_command)
from ragleak.cli.verify import verify_command  # noqa: E402

app.command("verify")(verify_command)
from ragleak.cli.audit import audit_command  # noqa: E402
app.command("audit")(audit_command)
from ragleak.cli.grid import grid_command  # noqa: E402

app.command("grid")(grid_command)
from ragleak.cli.report import diff_command, report_command  # noqa: E402

app.command("report")(report_command)
app.command("diff")(diff_command)
from ragleak.cli.score import score_command  # noqa: E402

app.command("score")(score_command)
from ragleak.cli.owncorpus import canary_app, mi_app  # noqa: E402

app.add_typer(canary_app, name="canary")
app.add_typer(mi_app, name="mi")


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        app()
    except RagleakError as exc:
        err_console.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
