"""The audit by effect, per defense and hook: the measured verdict with the static finding beside it.

The verdict is the probe's (``probe.measure``): active, pattern-limited (with the data types that
trigger it), inactive, not-overridden (Python resolves the hook to the base identity) or
undetermined (the probe could not run the hook). The static dataflow finding is shown next to it
as an explanation, with its ``file:line``; where the two differ the row says so. The static side
never sets the verdict: "undetermined" there is an answer, not a default.

``--strict`` problems (``problems``): a hook whose output releases retrieved passages verbatim, an
override measured inactive, a declared hook Python does not override, and a declared hook the
probe left undetermined - except where the probe could not run it at all (a token-level
``generate`` under the scripted generator) and the static analysis finds it active: that hook is
reported as unexercised, with the advice to run ``--probe stack``, and does not fail.
"""

from __future__ import annotations

import logging
from typing import Any

from ragleak.audit.inventory import HookFinding, inventory_class
from ragleak.audit.probe import DefenseEffect, HookEffect, Probe, measure
from ragleak.records import HOOK_NAMES, HookName, Record

log = logging.getLogger(__name__)

ON_PATH = frozenset({"active", "pattern-limited"})


class StaticSide(Record):
    """The static dataflow finding of one hook, shown beside the measurement."""

    status: str
    evidence: str
    location: str
    pattern: str | None = None


class EffectRow(Record):
    """One hook of one defense: the measured verdict, the static explanation, and whether they agree."""

    hook: HookName
    verdict: str
    declared: bool
    overridden: bool
    reason: str
    location: str | None = None
    triggers: list[str] = []
    channels: dict[str, Any] = {}
    releases_context: bool = False
    static: StaticSide | None = None
    agreement: str
    unexercised: bool = False  # the probe could not run the hook at all
    sensitivity: list[str] = []
    errors: list[str] = []


class DefenseAudit(Record):
    """The audit by effect of one defense class."""

    defense: str
    cls: str
    location: str
    probe: str
    declared_hooks: list[HookName]
    hooks: list[EffectRow]
    problems: list[str]
    errors: list[str] = []


def _static(cls: type) -> dict[str, StaticSide]:
    """The static findings of ``cls``'s hooks; a failure of the analysis leaves them out."""
    try:
        inv = inventory_class(cls)
    except Exception as exc:  # noqa: BLE001 - the static side explains; its failure must not hide the measurement
        log.info("static analysis of %s failed: %s: %s", cls.__qualname__, type(exc).__name__, exc)
        return {}
    return {f.hook: _side(f) for f in inv.findings}


def _side(f: HookFinding) -> StaticSide:
    return StaticSide(status=f.status, evidence=f.evidence, location=f.location, pattern=f.pattern)


def _agreement(verdict: str, static: StaticSide | None) -> str:
    if static is None:
        return "no static finding (the analysis could not read the class)"
    if static.status == verdict:
        return "agree"
    if static.status == "undetermined":
        return "static undetermined"
    if verdict == "undetermined":
        return f"not measured; static {static.status}"
    return f"disagree: static {static.status}, measured {verdict}"


def row(effect: HookEffect, declared: bool, static: StaticSide | None) -> EffectRow:
    unexercised = effect.verdict == "undetermined" and effect.reason.startswith("the probe cannot run it")
    return EffectRow(hook=effect.hook, verdict=effect.verdict, declared=declared, overridden=effect.overridden,
                     reason=effect.reason, location=effect.location, triggers=effect.triggers,
                     channels={c: v.model_dump() for c, v in effect.channels.items()},
                     releases_context=bool(effect.releases), static=static,
                     agreement=_agreement(effect.verdict, static), unexercised=unexercised,
                     sensitivity=effect.sensitivity, errors=effect.errors)


def problems(rows: list[EffectRow]) -> list[str]:
    """Why a defense fails a strict audit by effect (empty: it passes)."""
    out = []
    for r in rows:
        if r.releases_context:
            out.append(f"{r.hook} releases the retrieved context verbatim ({r.reason})")
        elif r.overridden and r.verdict == "inactive":
            out.append(f"{r.hook} is inactive ({r.reason})")
        elif r.declared and r.verdict == "not-overridden":
            out.append(f"{r.hook} is declared in `hooks` but Python resolves it to the base identity")
        elif r.declared and r.verdict == "undetermined":
            if r.unexercised and r.static is not None and r.static.status in ON_PATH:
                continue  # stated in the row: unexercised by this probe, active in the source
            out.append(f"{r.hook} is undetermined ({r.reason})")
    return out


def audit_class(probe: Probe, cls: type) -> DefenseAudit:
    """The audit by effect of one defense class on ``probe``."""
    effect: DefenseEffect = measure(probe, cls)
    statics = _static(cls)
    rows = [row(effect.effect(h), h in effect.declared_hooks, statics.get(h)) for h in HOOK_NAMES]
    return DefenseAudit(defense=effect.defense, cls=effect.cls, location=_class_location(cls), probe=effect.probe,
                        declared_hooks=effect.declared_hooks, hooks=rows, problems=problems(rows),
                        errors=effect.errors)


def _class_location(cls: type) -> str:
    from ragleak.audit.inventory import _class_location as located  # the file parsed once, not per class

    return located(cls)


def audit_by_effect(target: str, probe_kind: str = "scripted", cache_dir: str | None = None,
                    probe: Probe | None = None) -> list[DefenseAudit]:
    """``ragleak audit TARGET --probe KIND``: every defense class ``target`` names (a registered
    name, a ``.py`` file, ``file.py:Class``), imported as Python builds it, measured on one probe
    (``probe``: one built already, e.g. on a subset of the inputs; its cost is then the caller's to read)."""
    import contextlib

    from ragleak.audit.probe import build_probe
    from ragleak.audit.runtime import defense_classes, folder_on_path

    classes, path = defense_classes(target)
    probe = probe or build_probe(probe_kind, cache_dir=cache_dir)  # type: ignore[arg-type]
    with folder_on_path(path) if path is not None else contextlib.nullcontext():
        return [audit_class(probe, cls) for cls in classes]
