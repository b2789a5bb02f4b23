"""Metric-to-channel map: which channels each hook can reach, and when a reading is interpretable.

Channels are what a metric observes: ``retrieval`` (which documents surface), ``context`` (the
text the LLM sees) and ``output`` (the released text). A hook reaches its own channel and every
channel downstream of it on the pipeline path:

=================  ==============================
hook               reaches
=================  ==============================
score_retrieval    retrieval, context, output
rewrite_context    context, output
generate           output
postprocess        output
=================  ==============================

**The interpretable rule.** A reading of metric X on defense D is interpretable only when some
*active* hook of D reaches one of X's channels. Active means a combined verdict (``verdict``) of
active or pattern-limited and, when traces of the run are given, a change of a channel in at least
one call (``trace``: the selected top-k, the prompt or the answer against the identity hook's;
records from before the channel effect: a change of the hook's own output). Anything else measures a defense that is not on the path the metric observes: a
difference from the baseline there is noise or a side effect, not protection.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from ragleak.audit.inventory import DefenseInventory
from ragleak.audit.trace import HookActivity
from ragleak.audit.verdict import ON_PATH, combine
from ragleak.metrics.base import CHANNELS, Channel
from ragleak.records import HookName

__all__ = ["CHANNELS", "Channel", "HOOK_REACH", "active_hooks", "interpretable", "reach"]

HOOK_REACH: dict[HookName, frozenset[Channel]] = {
    "score_retrieval": frozenset({"retrieval", "context", "output"}),
    "rewrite_context": frozenset({"context", "output"}),
    "generate": frozenset({"output"}),
    "postprocess": frozenset({"output"}),
}


def reach(hooks: Iterable[HookName]) -> frozenset[Channel]:
    """The channels that any of ``hooks`` can affect."""
    out: set[Channel] = set()
    for hook in hooks:
        out |= HOOK_REACH[hook]
    return frozenset(out)


def active_hooks(inventory: DefenseInventory,
                 activity: Mapping[HookName, HookActivity] | None = None) -> list[HookName]:
    """Hooks whose combined verdict (``verdict.combine``) puts them on the path and, when
    ``activity`` is given, that changed a channel in at least one call (``HookActivity.effect_changed``)."""
    hooks = []
    for finding in inventory.findings:
        act = None if activity is None else activity.get(finding.hook)
        if combine(finding, act).verdict not in ON_PATH:
            continue
        if activity is not None and (act is None or act.effect_changed == 0):
            continue
        hooks.append(finding.hook)
    return hooks


def interpretable(metric_channels: Iterable[Channel], hooks: Iterable[HookName]) -> tuple[bool, str]:
    """Whether a metric on ``metric_channels`` can be read on a defense whose active hooks are ``hooks``."""
    hooks = list(hooks)
    wanted = frozenset(metric_channels)
    if not hooks:
        return False, "no active hook"
    hit = sorted(wanted & reach(hooks))
    if hit:
        by = sorted(h for h in hooks if HOOK_REACH[h] & wanted)
        return True, f"{', '.join(by)} reaches {', '.join(hit)}"
    return False, f"active hooks ({', '.join(sorted(hooks))}) do not reach {', '.join(sorted(wanted))}"
