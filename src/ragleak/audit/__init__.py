"""The active-path audit: is a defense on the path it claims to protect?

* ``inventory``: static, from the source (``ast``): per hook, not-overridden / pass-through /
  pattern-limited / active, with evidence and ``file:line``;
* ``trace``: dynamic, from a run's traces: per hook, in N of M calls output != input;
* ``channels``: which channels each hook reaches, and the interpretable rule for metric readings;
* ``dashboard``: Table I (hook status) and Table II (metric deltas marked interpretable or not).
"""

from ragleak.audit.inventory import (
    AuditError,
    DefenseInventory,
    HookFinding,
    StubHookError,
    inventory_class,
    inventory_file,
    inventory_of,
)
from ragleak.audit.trace import HookActivity, hook_activity, load_traces

__all__ = [
    "AuditError", "DefenseInventory", "HookActivity", "HookFinding", "StubHookError", "hook_activity",
    "inventory_class", "inventory_file", "inventory_of", "load_traces",
]
