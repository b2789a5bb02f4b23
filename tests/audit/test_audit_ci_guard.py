"""CI guard: no registered defense of ours that imports may have a stubbed or missing declared hook.

Defenses are written by several people at once; this audits every registered defense that
imports now (an import failure is reported, not hidden) and fails on any pass-through, any
hook declared in ``hooks`` but not implemented, and any registered defense whose declared hooks
are all inactive.
"""

from __future__ import annotations

import warnings

import pytest

from ragleak.audit import inventory_class
from ragleak.audit.inventory import AuditError, load_registered
from ragleak.defenses import DEFENSES, ENDPOINT_DEFENSES


def _importable():
    out = []
    for name in DEFENSES.names():
        try:
            out.append((name, load_registered(DEFENSES, name)))
        except AuditError as exc:
            warnings.warn(f"CI guard skips {name}: {exc}", stacklevel=1)
    return out


IMPORTABLE = _importable()


def test_the_guard_audits_at_least_the_baseline():
    assert "none" in [name for name, _ in IMPORTABLE]


@pytest.mark.parametrize("name, cls", IMPORTABLE, ids=[n for n, _ in IMPORTABLE])
def test_registered_defense_has_no_stubbed_declared_hook(name, cls):
    inv = inventory_class(cls)
    declared = [f for f in inv.findings if f.declared]
    bad = [f"{f.hook}: {f.problem} at {f.location} ({f.evidence})" for f in inv.findings if f.problem]
    assert not bad, f"defense {name!r}: " + "; ".join(bad)
    assert all(f.status in {"active", "pattern-limited"} for f in declared), [(f.hook, f.status) for f in declared]
    if name not in ENDPOINT_DEFENSES:  # the baseline, and an endpoint's own defense (its hooks run in the service)
        assert declared, f"defense {name!r} declares no hooks"


def test_the_guard_fails_on_a_stub():
    """The same check, applied to a stub, fails (the guard itself can fail)."""
    from audit_helpers import load_fixture

    stub = load_fixture("dp_stubs").StubbedDPRetrieval
    inv = inventory_class(stub)
    assert any(f.problem for f in inv.findings if f.declared)
