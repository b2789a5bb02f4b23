"""Dynamic audit: from the traces of a run, per defense and hook, in how many calls the content changed.

Each ``Trace`` carries, for every hook, digests of what the identity hook would have passed on
and of what the defense passed on (``records.HookRecord``: exact and content-only, the input
snapshotted before the hook ran). A hook "changed" a call when the content differs; a
re-ordering alone is counted apart, and so is an output that carries retrieved passages verbatim.
A statically active hook that changed 0 of M calls is inactive in this run; a pattern-limited
hook shows up here as its firing rate.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Iterator

from pydantic import ValidationError

from ragleak.audit.source import AuditError
from ragleak.records import HOOK_NAMES, HookName, Record, Trace


class HookActivity(Record):
    """How often one hook of one defense changed the content of what flowed through it.

    ``changed`` counts content changes only; ``reordered`` counts calls that only re-ordered
    (same passages, scores and text); ``releases`` counts calls whose output carried a retrieved
    passage verbatim that the hook's input did not. For a pattern-limited hook ``rate`` is its
    firing rate."""

    defense: str
    hook: HookName
    changed: int
    calls: int  # audited calls: the rate reads these only
    reordered: int = 0
    releases: int = 0
    unaudited: int = 0  # calls whose reference was not computed (pipeline.rag.AuditPolicy)

    @property
    def rate(self) -> float | None:
        return self.changed / self.calls if self.calls else None

    @property
    def label(self) -> str:
        return f"{self.changed}/{self.calls}"


def hook_activity(traces: Iterable[Trace]) -> dict[str, dict[HookName, HookActivity]]:
    """``{defense: {hook: HookActivity}}`` over ``traces`` (every hook listed, even with 0 calls)."""
    counts: dict[str, dict[str, dict[str, int]]] = {}
    for trace in traces:
        per = counts.setdefault(trace.defense, {h: dict.fromkeys(("changed", "calls", "reordered", "releases",
                                                                  "unaudited"), 0) for h in HOOK_NAMES})
        for record in trace.hooks:
            row = per[record.hook]
            row["releases"] += int(record.releases_context)
            if not record.audited:
                row["unaudited"] += 1
                continue
            row["changed"] += int(record.changed)
            row["calls"] += 1
            row["reordered"] += int(record.order_only)
    return {d: {h: HookActivity(defense=d, hook=h, **row) for h, row in per.items()} for d, per in counts.items()}


def _traces_in(value: Any) -> Iterator[Trace]:
    """Every Trace inside a JSON value: a Trace itself, a list, or any field (``trace``, ``traces``, ...)."""
    if isinstance(value, dict):
        if "hooks" in value and "query" in value and "prompt" in value:
            try:
                yield Trace.model_validate(value)
                return
            except ValidationError as exc:
                raise AuditError(f"a trace record does not validate: {exc.errors()[0]['msg']}") from None
        for item in value.values():
            yield from _traces_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from _traces_in(item)


def load_traces(directory: str | Path) -> list[Trace]:
    """Read every Trace from the ``*.json`` and ``*.jsonl`` files under ``directory`` (recursively)."""
    root = Path(directory)
    if not root.is_dir():
        raise AuditError(f"--run {root}: not a directory")
    traces: list[Trace] = []
    for path in sorted(p for p in root.rglob("*") if p.suffix in {".json", ".jsonl"} and p.is_file()):
        text = path.read_text(encoding="utf-8")
        try:
            values = [json.loads(line) for line in text.splitlines() if line.strip()] if path.suffix == ".jsonl" \
                else [json.loads(text)]
        except json.JSONDecodeError as exc:
            raise AuditError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
        for value in values:
            traces.extend(_traces_in(value))
    if not traces:
        raise AuditError(f"--run {root}: no traces found in its .json/.jsonl files")
    return traces
