"""The audit dashboard: Table I (hook status per defense) and Table II (metric deltas, interpretable or not).

Both tables are plain JSON records (``table_one``, ``table_two``): this module builds them, the
CLI (``ragleak.cli.tables``) renders them for the terminal and the report renders them as HTML.

Table I's overall status per defense, from its active hooks (``channels.active_hooks``):

* ``releases-context``: a hook puts the retrieved passages into the output verbatim (statically or
  in the run): whatever else it does, it is no privacy transform;
* ``baseline``: no active hook and none declared (the undefended pipeline);
* ``inactive``: it declares hooks but none is active - every claim is a stub or missing;
* ``retrieval-only``: only ``score_retrieval`` is active (the released text is not protected by it);
* ``pattern-limited``: every active hook only acts on pattern matches;
* ``end-to-end``: an active hook on the context or output side that is not pattern-limited.

Per hook, a row carries ``verdict`` (the combined verdict of ``verdict.combine``) with its
``reason``, ``releases_context`` and ``pattern``, ``static`` (the inventory status, its form,
evidence and location), ``dynamic`` (with traces or a grid's cells: the per-channel effect -
calls in which the selected top-k, the rendered prompt or the answer differed from the identity
hook's on the same input, of the calls measured - beside the calls whose own output changed,
re-orderings and calls that released context; ``basis`` says "own output" for records written
before the channel effect, whose counts are own-output changes), ``static_active`` and ``active``
(on the path and, when traces are given, changed a channel in at least one call: a hook that
only changed its own output, or a pattern-limited hook that never fired in the run, is not active
in that run).

Table II takes plain per-defense readings (a delta against the baseline with its interval, e.g.
from ``readings_from_runs``) and marks each cell by the interpretable rule of ``channels``.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, Sequence

from ragleak.audit.channels import active_hooks, interpretable
from ragleak.audit.inventory import ACTIVE_STATUSES, AuditError, DefenseInventory
from ragleak.audit.trace import HookActivity
from ragleak.audit.verdict import combine, problem
from ragleak.metrics.base import Channel
from ragleak.metrics.stats import paired_bootstrap_delta, unpaired_bootstrap_delta
from ragleak.records import HOOK_NAMES, HookName, Record

Activity = Mapping[str, Mapping[HookName, HookActivity]]


class MetricReading(Record):
    """One Table II input: a defense's delta on a metric against the baseline, with its interval."""

    defense: str
    metric: str
    delta: float
    low: float | None = None
    high: float | None = None
    baseline: str = "none"


def overall_status(inv: DefenseInventory, hooks: Sequence[HookName], releases: bool = False) -> str:
    if releases:
        return "releases-context"
    if not hooks:
        return "inactive" if inv.declared_hooks else "baseline"
    if set(hooks) <= {"score_retrieval"}:
        return "retrieval-only"
    if all(inv.finding(h).status == "pattern-limited" for h in hooks):
        return "pattern-limited"
    return "end-to-end"


def table_one(inventories: Iterable[DefenseInventory], activity: Activity | None = None) -> list[dict[str, Any]]:
    """One JSON row per defense: per hook the combined verdict, the static finding and (with traces)
    the dynamic counts."""
    rows = []
    for inv in inventories:
        dyn = None if activity is None else activity.get(inv.defense)
        hooks = active_hooks(inv, dyn if activity is not None else None)
        cells, warnings = {}, []
        for hook in HOOK_NAMES:
            f = inv.finding(hook)
            act = None if dyn is None else dyn.get(hook)
            v = combine(f, act)
            cells[hook] = {
                "verdict": v.verdict, "reason": v.reason, "releases_context": v.releases_context,
                "pattern": v.pattern,
                "static": f.status, "form": f.form, "declared": f.declared, "defined_in": f.defined_in,
                "location": f.location, "evidence": f.evidence,
                "dynamic": None if act is None else _dynamic(act),
                "static_active": f.status in ACTIVE_STATUSES,
                "active": hook in hooks,  # on the path and, with traces, changed a channel in at least one call
            }
            why = problem(f, v)
            if why:
                warnings.append(why)
            elif v.verdict == "pattern-limited" and v.dynamic is not None and v.dynamic["changed"] == 0:
                warnings.append(f"{hook} is pattern-limited and never fired (changed "
                                f"{'a channel in ' if v.dynamic['basis'] == 'channel' else ''}0 of "
                                f"{v.dynamic['calls']} calls)")
        if activity is not None and dyn is None:
            warnings.append("no traces of this defense in the run")
        releases = any(c["releases_context"] for c in cells.values())
        rows.append({"defense": inv.defense, "class": inv.cls, "location": inv.location,
                     "declared_hooks": list(inv.declared_hooks), "status": overall_status(inv, hooks, releases),
                     "releases_context": releases, "active_hooks": hooks, "hooks": cells, "problems": warnings,
                     "notes": list(inv.notes)})
    return rows


def _dynamic(act: HookActivity) -> dict[str, Any]:
    """Table I's dynamic column of one hook: the per-channel effect (``basis`` "channel": calls
    that changed the selected top-k, the prompt or the answer against the identity hook's, of the
    calls measured; ``output_changed``: calls whose own output changed) or, for records from before
    the channel effect, the own-output counts (``basis`` "own output")."""
    out: dict[str, Any] = {"changed": act.effect_changed, "calls": act.effect_calls,
                           "basis": "channel" if act.by_channel else "own output", "output_changed": act.changed,
                           "reordered": act.channel_reordered if act.by_channel else act.reordered,
                           "releases": act.releases}
    if act.by_channel and act.channel_unmeasured:
        out["unmeasured"] = act.channel_unmeasured
    if act.unaudited:
        out["unaudited"] = act.unaudited
    return out


def dynamic_text(dyn: dict[str, Any] | None) -> str:
    """A Table I cell's dynamic part: `` N/M`` channel changes of the calls measured, `` (own K)``
    where the hook's own output changed in more calls than its channel, ``~`` where the counts are
    own-output changes (records, or a Table I, from before the per-channel effect)."""
    if dyn is None:
        return ""
    text = f" {dyn['changed']}/{dyn['calls']}"
    if dyn.get("basis", "own output") != "channel":
        return text + "~"
    own = dyn.get("output_changed", 0)
    return text + (f" (own {own})" if own > dyn["changed"] else "")


def table_two(
    readings: Iterable[MetricReading],
    inventories: Iterable[DefenseInventory],
    activity: Activity | None = None,
    channels_of: Callable[[str], Iterable[Channel]] | None = None,
) -> list[dict[str, Any]]:
    """One JSON cell per reading, marked interpretable or not (with the reason)."""
    if channels_of is None:
        from ragleak.metrics import metric_channels as channels_of
    by_name = {inv.defense: inv for inv in inventories}
    cells = []
    for r in readings:
        if r.defense not in by_name:
            raise AuditError(f"a reading names defense {r.defense!r}, which has no inventory")
        inv = by_name[r.defense]
        dyn = None if activity is None else activity.get(r.defense, {})
        chans = sorted(channels_of(r.metric))
        ok, reason = interpretable(chans, active_hooks(inv, dyn))
        cells.append({**r.model_dump(), "channels": chans, "interpretable": ok, "reason": reason})
    return cells


def readings_from_runs(
    runs: Mapping[str, Mapping[str, Sequence[float]]],
    baseline: str = "none",
    *,
    paired: bool = True,
    seed: int = 0,
) -> list[MetricReading]:
    """Deltas against ``baseline`` from per-run values ``{defense: {metric: [v_run1, ...]}}``.

    With ``paired`` (run i of every defense shares its conditions with run i of the baseline) the
    paired bootstrap is used; otherwise the arms are resampled independently.
    """
    if baseline not in runs:
        raise AuditError(f"the baseline {baseline!r} has no runs")
    out = []
    for defense, metrics in runs.items():
        if defense == baseline:
            continue
        for metric, values in metrics.items():
            if metric not in runs[baseline]:
                raise AuditError(f"metric {metric!r} has no baseline runs")
            base = runs[baseline][metric]
            fn = paired_bootstrap_delta if paired else unpaired_bootstrap_delta
            iv = fn(values, base, seed=seed)
            out.append(MetricReading(defense=defense, metric=metric, delta=iv.estimate, low=iv.low,
                                     high=iv.high, baseline=baseline))
    return out
