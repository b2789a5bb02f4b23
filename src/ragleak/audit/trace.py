"""Dynamic audit: from the traces of a run, per defense and hook, in how many calls a channel changed.

Each ``Trace`` carries, for every hook, digests of what the identity hook would have passed on
and of what the defense passed on (``records.HookRecord``: exact and content-only, the input
snapshotted before the hook ran), and the call's effect on the channel the hook feeds
(``HookRecord.channel``: the selected top-k, the rendered prompt, the answer, each against the
identity hook on the same input, as the audit by effect compares them). A hook's verdict reads
the channel counts: a hook that changed its own output but no channel (a monotone rescoring, a
pool cap above top-k, an id rewrite) changed nothing a user sees. Records written before the
channel effect existed have only the own-output counts; those are read instead, and said to be.
A statically active hook that changed no channel in M calls is inactive in this run; a
pattern-limited hook shows up here as its firing rate.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from pydantic import ValidationError

from ragleak.audit.source import AuditError
from ragleak.records import HOOK_NAMES, HookName, HookRecord, Record, Trace

#: The own-output counts of a hook summary row (``tally``); ``unaudited`` appears only when nonzero.
OUTPUT_KEYS = ("changed", "calls", "reordered", "releases")
#: The channel counts of a row, present only where every call of the hook recorded its channel effect.
CHANNEL_KEYS = ("channel_calls", "channel_changed", "channel_reordered", "channel_unmeasured")


class HookActivity(Record):
    """How often one hook of one defense changed what flowed through it, and what reached a channel.

    ``changed`` counts calls whose own output differed from its input in content; ``reordered``
    counts calls that only re-ordered (same passages, scores and text); ``releases`` counts calls
    whose output carried a retrieved passage verbatim that the hook's input did not. The
    ``channel_*`` counts are per channel effect (``HookRecord.channel``): ``channel_calls`` the
    calls whose effect was measured, ``channel_changed`` those where the channel changed,
    ``channel_reordered`` those where it carried the same passages in another order,
    ``channel_unmeasured`` those with no identity reference (a skipped reference generation).
    ``channel_calls`` None: records from before the channel effect (``by_channel`` False), where
    ``effect_changed``/``effect_calls`` fall back to the own-output counts. For a
    pattern-limited hook ``rate`` is its firing rate."""

    defense: str
    hook: HookName
    changed: int
    calls: int  # audited calls: the own-output rate reads these only
    reordered: int = 0
    releases: int = 0
    unaudited: int = 0  # calls whose reference was not computed (pipeline.rag.AuditPolicy)
    channel_calls: int | None = None
    channel_changed: int = 0
    channel_reordered: int = 0
    channel_unmeasured: int = 0

    @property
    def by_channel(self) -> bool:
        return self.channel_calls is not None

    @property
    def effect_changed(self) -> int:
        """Calls that changed a channel (old records: calls that changed the hook's own output)."""
        return self.channel_changed if self.by_channel else self.changed

    @property
    def effect_calls(self) -> int:
        return self.channel_calls if self.channel_calls is not None else self.calls

    @property
    def rate(self) -> float | None:
        return self.effect_changed / self.effect_calls if self.effect_calls else None

    @property
    def label(self) -> str:
        return f"{self.effect_changed}/{self.effect_calls}"


def tally(records: Iterable[HookRecord]) -> dict[HookName, dict[str, int]]:
    """Per hook, the counts of ``records`` (``OUTPUT_KEYS``, ``unaudited`` where nonzero, and
    ``CHANNEL_KEYS`` where every record of that hook carries its channel effect): the row a grid
    cell keeps as its ``hook_summary`` and ``hook_activity`` reads."""
    rows: dict[HookName, dict[str, int]] = {}
    legacy: set[str] = set()
    for record in records:
        row = rows.setdefault(record.hook, {**dict.fromkeys(OUTPUT_KEYS, 0), **dict.fromkeys(CHANNEL_KEYS, 0)})
        row["releases"] += int(record.releases_context)
        if record.audited:
            row["calls"] += 1
            row["changed"] += int(record.changed)
            row["reordered"] += int(record.order_only)
        else:  # only where the audit policy skipped a reference generation
            row["unaudited"] = row.get("unaudited", 0) + 1
        if record.channel is None:
            legacy.add(record.hook)
        elif record.channel == "unmeasured":
            row["channel_unmeasured"] += 1
        else:
            row["channel_calls"] += 1
            row["channel_changed"] += int(record.channel == "changed")
            row["channel_reordered"] += int(record.channel == "reordered")
    for hook in legacy:  # one record without the channel effect: the row cannot claim it
        for key in CHANNEL_KEYS:
            rows[hook].pop(key)
    return rows


def activity_of(defense: str, hook: HookName, rows: Iterable[Mapping[str, int]]) -> HookActivity:
    """One hook's activity summed over summary rows (``tally``'s, e.g. one per grid cell): the
    channel counts only where every row has them, else the own-output counts alone."""
    rows = [r for r in rows if r]
    total = {k: sum(r.get(k, 0) for r in rows) for k in (*OUTPUT_KEYS, "unaudited")}
    channel: dict[str, Any] = {}
    if rows and all("channel_calls" in r for r in rows):
        channel = {k: sum(r[k] for r in rows) for k in CHANNEL_KEYS}
    return HookActivity(defense=defense, hook=hook, **total, **channel)


def hook_activity(traces: Iterable[Trace]) -> dict[str, dict[HookName, HookActivity]]:
    """``{defense: {hook: HookActivity}}`` over ``traces`` (every hook listed, even with 0 calls)."""
    records: dict[str, list[HookRecord]] = {}
    for trace in traces:
        records.setdefault(trace.defense, []).extend(trace.hooks)
    out = {}
    for defense, recs in records.items():
        rows = tally(recs)
        out[defense] = {h: activity_of(defense, h, [rows[h]] if h in rows else []) for h in HOOK_NAMES}
    return out


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
