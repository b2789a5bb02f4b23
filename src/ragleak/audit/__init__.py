"""The active-path audit: is a defense on the path it claims to protect?

* ``astflow``: static dataflow of one hook (can what it passes on differ in content from its input?);
* ``inventory``: per defense class or ``.py`` file and per hook: not-overridden / inactive /
  pattern-limited / active / undetermined, with evidence and ``file:line``;
* ``trace``: dynamic, from a run's traces: per hook, the calls of M that changed a channel (the
  selected top-k, the prompt, the answer, against the identity hook on the same input), beside
  own-output content changes, order-only calls and calls that released retrieved passages verbatim;
* ``verdict``: the combined verdict per hook from both;
* ``channels``: which channels each hook reaches, and the interpretable rule for metric readings;
* ``dashboard``: Table I (hook verdicts) and Table II (metric deltas marked interpretable or not);
* the audit by effect (``ragleak audit --probe``, issue 38): ``runtime`` imports the defense as
  Python builds it, ``probe_corpus`` holds the paired probe inputs, ``probe_generator`` the scripted probe's LLM, ``probe`` measures each hook's
  effect on retrieval, prompt and answer against the identity hook, and ``effect`` puts the static
  finding beside the measured verdict.
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
from ragleak.audit.verdict import HookVerdict, combine

__all__ = [
    "AuditError", "DefenseInventory", "HookActivity", "HookFinding", "HookVerdict", "StubHookError", "combine",
    "hook_activity",
    "inventory_class", "inventory_file", "inventory_of", "load_traces",
]
