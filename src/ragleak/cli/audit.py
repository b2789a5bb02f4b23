"""`ragleak audit DEFENSE_NAME_OR_FILE.py [--probe scripted|stack [--probe-types T,..] | --run DIR] [--readings FILE] [--json] [--strict]`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer


def audit_command(
    target: str = typer.Argument(..., help="a registered defense name, or a .py file with Defense subclasses"),
    run: Optional[Path] = typer.Option(None, "--run", help="a run directory of trace JSON files: adds the dynamic N of M"),
    readings: Optional[Path] = typer.Option(None, "--readings", help="JSON list of metric readings "
                                            "({defense, metric, delta, low, high}) for Table II"),
    probe: Optional[str] = typer.Option(None, "--probe", help="scripted | stack: import the defense and measure "
                                        "each hook's effect on retrieval, prompt and answer through the real "
                                        "pipeline on paired probes (scripted: real embedder and index, scripted "
                                        "LLM; stack: the packaged LLM too); the static finding is shown beside"),
    probe_types: Optional[str] = typer.Option(None, "--probe-types", help="with --probe: only the paired inputs of "
                                              "these data types (comma-separated, e.g. email,injection) and every "
                                              "neutral one - quicker, blind to hooks keyed to other types; "
                                              "default: every type"),
    as_json: bool = typer.Option(False, "--json", help="print machine-readable JSON"),
    strict: bool = typer.Option(False, "--strict", help="exit 2 when a declared hook is inactive, undetermined or "
                                "missing, an override is inactive, or a hook releases the retrieved context"),
) -> None:
    """Per hook of a defense: the verdict (active, pattern-limited, inactive, undetermined). With --probe, measured:
    what each hook changes on each channel, the static analysis beside it as the explanation. Without, from the
    static dataflow of its source and, with --run, the trace of how often it changed its input's content."""
    if probe is not None:
        if run is not None or readings is not None:
            from ragleak.audit.source import AuditError as _AuditError

            raise _AuditError("--probe measures the hooks itself: leave out --run and --readings")
        _probe_command(target, probe, as_json, strict, probe_types)
        return
    if probe_types is not None:
        from ragleak.audit.source import AuditError as _AuditError

        raise _AuditError("--probe-types selects the inputs of --probe: name --probe scripted or stack")
    from pydantic import ValidationError
    from rich.console import Console

    from ragleak.audit.dashboard import MetricReading, table_one, table_two
    from ragleak.audit.inventory import AuditError, StubHookError, inventory_of
    from ragleak.audit.trace import hook_activity, load_traces
    from ragleak.cli.tables import render_table_one, render_table_two, show

    inventories = inventory_of(target)
    activity = hook_activity(load_traces(run)) if run is not None else None
    rows = table_one(inventories, activity)
    data: dict = {"defenses": rows}
    if readings is not None:
        try:
            raw = json.loads(readings.read_text(encoding="utf-8"))
            parsed = [MetricReading.model_validate(r) for r in raw]
        except (OSError, json.JSONDecodeError, ValidationError, TypeError) as exc:
            raise AuditError(f"--readings {readings}: {exc}") from None
        data["table_two"] = table_two(parsed, inventories, activity)
    if as_json:
        sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    else:
        console = Console()
        show(console, render_table_one(rows))
        for row in rows:
            if row["releases_context"]:
                console.print(f"[red]{row['class']} releases the retrieved context verbatim[/red]",
                              highlight=False, soft_wrap=True)
            for hook, cell in row["hooks"].items():
                if cell["static"] != "not-overridden" or cell["declared"]:
                    verdict = "releases context" if cell["releases_context"] else cell["verdict"]
                    dyn = cell["dynamic"]
                    by_channel = dyn is not None and dyn.get("basis") == "channel"
                    did = "fired in" if cell["verdict"] == "pattern-limited" else \
                        "changed a channel in" if by_channel else "changed the content of"
                    trace = "" if dyn is None else f"; trace: {did} {dyn['changed']} of {dyn['calls']} calls" + \
                        (f", its own output in {dyn['output_changed']}" if by_channel else "") + \
                        (f", re-ordered only {dyn['reordered']}" if dyn["reordered"] else "") + \
                        (f", released context {dyn['releases']}" if dyn["releases"] else "")
                    pattern = f"; pattern: {cell['pattern']}" if cell["pattern"] else ""
                    console.print(f"{row['class']}.{hook}: {verdict} (static {cell['static']} at {cell['location']}: "
                                  f"{cell['evidence']}{pattern}{trace})", highlight=False, soft_wrap=True, markup=False)
            for problem in row["problems"]:
                console.print(f"[red]problem:[/red] {row['class']}: {problem}", highlight=False, soft_wrap=True)
        if "table_two" in data:
            show(console, render_table_two(data["table_two"]))
    if strict:
        problems = [f"{r['defense']}: {p}" for r in rows for p in r["problems"]]
        if problems:
            raise StubHookError("strict audit failed: " + "; ".join(problems))


def _probe_command(target: str, probe: str, as_json: bool, strict: bool, types: str | None = None) -> None:
    """The audit by effect (``audit.effect``), printed or as JSON with what the probe cost (model
    generations, answers left ungenerated, seconds); exit 2 under --strict on a problem."""
    import time

    from rich.console import Console

    from ragleak.audit.effect import audit_by_effect
    from ragleak.audit.inventory import StubHookError
    from ragleak.audit.probe import build_probe, select_inputs
    from ragleak.audit.runtime import defense_classes

    wall, cpu = time.perf_counter(), time.process_time()
    defense_classes(target)  # a target that does not import fails before the model loads
    chosen = select_inputs([t.strip() for t in types.split(",") if t.strip()]) if types is not None else None
    built = build_probe(probe, inputs=chosen)  # type: ignore[arg-type]
    try:
        audits = audit_by_effect(target, probe, probe=built)
    finally:
        built.close()
    cost = {**built.cost().model_dump(mode="json"), "wall_s": round(time.perf_counter() - wall, 1),
            "cpu_s": round(time.process_time() - cpu, 1), "types": "all" if types is None else types}
    if as_json:
        data = {"probe": probe, "cost": cost, "defenses": [a.model_dump(mode="json") for a in audits]}
        sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    else:
        console = Console()
        say = lambda text: console.print(text, highlight=False, soft_wrap=True, markup=False)  # noqa: E731
        for a in audits:
            named = f"{a.defense}, " if a.defense != a.cls else ""
            say(f"{a.cls} ({named}{a.location}), probe {a.probe}; declared: {', '.join(a.declared_hooks) or '-'}")
            for r in a.hooks:
                if not (r.overridden or r.declared):
                    continue
                verdict = "releases context" if r.releases_context else r.verdict
                if r.verdict == "pattern-limited":
                    verdict += f" ({', '.join(r.triggers)})"
                say(f"  {r.hook}{'*' if r.declared else ''}: {verdict} - {r.reason}" +
                    (f" [{r.location}]" if r.location else ""))
                if r.static is not None:
                    say(f"    static: {r.static.status} at {r.static.location}: {r.static.evidence}"
                        f"{'' if r.agreement == 'agree' else ' -- ' + r.agreement}")
                for note in r.sensitivity:
                    say(f"    not exercised: {note}")
            for problem in a.problems:
                say(f"  problem: {problem}")
        say(f"probe {probe} on {cost['inputs']} inputs ({cost['types']} types): {cost['generations']} model "
            f"generations, {cost['cache_hits']} cache hits, {cost['never_generated']} answers never needed; "
            f"{cost['wall_s']} s wall, {cost['cpu_s']} s CPU" +
            (f"; {cost['determinism']}" if cost["determinism"] else ""))
    if strict:
        problems = [f"{a.cls}: {p}" for a in audits for p in a.problems]
        if problems:
            raise StubHookError("strict audit failed: " + "; ".join(problems))
