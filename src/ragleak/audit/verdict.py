"""The combined verdict per hook: the static dataflow finding and the dynamic trace together.

=====================  ==========================  ==================================================
static                 trace (calls > 0)           verdict
=====================  ==========================  ==================================================
any                    releases context            inactive (releases context: never a privacy transform)
releases context       -                           inactive (releases context)
active                 changed 0 of M              inactive (on the path in the source, never acted)
active                 changed N > 0               active
pattern-limited        any                         pattern-limited (the firing rate N/M is reported)
inactive               changed 0                   inactive
inactive               changed N > 0               active (the trace shows a change the static analysis missed)
undetermined           changed 0 / N > 0           inactive / active (the trace decides)
any                    no trace                    the static status (undetermined stays undetermined)
=====================  ==========================  ==================================================

Changes are changes of a channel (``HookActivity.effect_changed``): the top-k selected, the
rendered prompt or the answer against the identity hook's on the same input, as the audit by
effect measures them; a hook that changed its own output in N calls but no channel is inactive,
and says so. Records written before the channel effect was recorded are read by their own-output
content changes (a re-ordering that keeps every passage, score and text is not one), and the
reason says so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from ragleak.records import HookName, Record

if TYPE_CHECKING:  # the inventory asks this module for its findings' problems
    from ragleak.audit.inventory import HookFinding
    from ragleak.audit.trace import HookActivity

Verdict = Literal["active", "pattern-limited", "inactive", "undetermined", "not-overridden"]
#: Verdicts of a hook that is on its path: the interpretable rule and Table I count these.
ON_PATH: frozenset[str] = frozenset({"active", "pattern-limited"})


class HookVerdict(Record):
    """One hook's combined verdict, with the static and dynamic evidence it rests on."""

    hook: HookName
    verdict: Verdict
    static: str  # the inventory's HookStatus
    reason: str
    releases_context: bool = False
    pattern: str | None = None
    dynamic: dict[str, Any] | None = None


def combine(finding: HookFinding, activity: HookActivity | None = None) -> HookVerdict:
    """The verdict of ``finding`` given the hook's activity in a run (None: no trace)."""
    static = finding.status
    dyn = None
    if activity is not None and activity.effect_calls:
        dyn = {"changed": activity.effect_changed, "calls": activity.effect_calls,
               "basis": "channel" if activity.by_channel else "own output",
               "output_changed": activity.changed,
               "reordered": activity.channel_reordered if activity.by_channel else activity.reordered,
               "releases": activity.releases, "rate": activity.rate}
    common = {"hook": finding.hook, "static": static, "pattern": finding.pattern, "dynamic": dyn}
    unmeasured = "" if activity is None or not activity.channel_unmeasured else \
        f"; its channel effect was unmeasured in {activity.channel_unmeasured} calls (no reference generation)"
    if static == "not-overridden":
        return HookVerdict(verdict="not-overridden", reason="inherits the base identity hook", **common)
    if dyn is not None and dyn["releases"]:
        return HookVerdict(verdict="inactive", releases_context=True,
                           reason=f"the output carried retrieved passages verbatim in {dyn['releases']} of "
                                  f"{dyn['calls']} calls", **common)
    if finding.releases_context:
        return HookVerdict(verdict="inactive", releases_context=True, reason=finding.evidence, **common)
    if dyn is None:
        return HookVerdict(verdict=static, reason=finding.evidence + unmeasured, **common)
    n, m = dyn["changed"], dyn["calls"]
    if dyn["basis"] == "channel":
        did, none = "changed a channel in", "changed no channel in"
        if dyn["output_changed"]:
            reordered = f", re-ordered the same passages in {dyn['reordered']}" if dyn["reordered"] else ""
            none = f"changed its own output in {dyn['output_changed']} calls{reordered}; no channel changed in"
        tail = unmeasured
    else:
        did, none = "changed the content of", "changed the content of 0 of"
        tail = unmeasured + "; own-output counts: these records predate the per-channel effect"
    if static == "pattern-limited":
        return HookVerdict(verdict="pattern-limited", reason=f"{finding.evidence}; fired in {n} of {m} calls{tail}",
                           **common)
    if n == 0:
        zero = f"{none} {m} calls"
        why = {"active": "active in the source, but {zero}",
               "inactive": "{evidence}; {zero}",
               "undetermined": "undetermined statically ({evidence}); {zero}"}[static]
        return HookVerdict(verdict="inactive", reason=why.format(zero=zero, evidence=finding.evidence) + tail, **common)
    why = {"active": "{evidence}; {did} {n} of {m} calls",
           "inactive": "the trace shows that it {did} {n} of {m} calls, which the static analysis did not find "
                       "({evidence})",
           "undetermined": "undetermined statically ({evidence}); {did} {n} of {m} calls"}[static]
    return HookVerdict(verdict="active", reason=why.format(did=did, n=n, m=m, evidence=finding.evidence) + tail,
                       **common)


def problem(finding: HookFinding, verdict: HookVerdict) -> str | None:
    """Why this hook fails a strict audit, or None: it releases context, an override is inactive,
    or a declared hook is undetermined or not implemented."""
    if verdict.releases_context:
        return f"{finding.hook} releases the retrieved context verbatim ({verdict.reason})"
    if verdict.verdict == "inactive":
        return f"{finding.hook} is inactive ({verdict.reason})"
    if finding.declared and verdict.verdict == "undetermined":
        return f"{finding.hook} is undetermined ({verdict.reason})"
    if finding.declared and verdict.verdict == "not-overridden":
        return f"{finding.hook} is declared in `hooks` but not implemented"
    return None
